"""CreateXgboostReport: an HTML report of an XGBoost training job, as SageMaker's report rule made.

Never finds an issue: it reads every saved step and rewrites the report after each one, so the
report follows the job while it runs and the last one describes the whole run; the rule ends
``NoIssuesFound`` when training has ended. The report (``xgboost_report.html``, one
self-contained file with inline SVG plots) goes to the rule's output, ``$MURPHY_RESULT_PATH``
(``s3://<bucket>/<job>/rule-output/CreateXgboostReport/`` under SageMaker's layout), or to
``output_uri`` when given (murphy extension). Sections: the hyperparameters, the metrics over
the rounds (``<eval>-<metric>``), the latest feature importance per type, the confusion matrix
of the latest validation labels and predictions, and the deepest tree per saved round.

A multi-worker trial (distributed XGBoost, one worker per host) is reported from its first
worker, ``worker_0`` (rank 0), read through a :class:`~murphy.trial.worker_view.WorkerView`:
distributed XGBoost trains one model on every worker and allreduces the evaluation metrics, so
each worker holds the same trees, importances and metrics; a second worker's copy of them would
only double every metric's line. The report says which worker it describes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape
from typing import Any

import numpy as np

from murphy.rules.builtin import _svg
from murphy.rules.builtin._common import reject_unknown, value_at
from murphy.rules.builtin._metric_pairs import first_value, split_metric
from murphy.rules.builtin._workers import series_workers
from murphy.rules.builtin.class_imbalance import class_indices
from murphy.rules.builtin.tree_depth import TreeDepth
from murphy.rules.rule import Rule
from murphy.storage import open_store
from murphy.trial.worker_view import WorkerView

REPORT_FILE = "xgboost_report.html"
_IMPORTANCE = re.compile(r"^feature_importance/([^/]+)/(.+)$")
_HYPER = "hyperparameters/"


class CreateXgboostReport(Rule):
    """Writes ``xgboost_report.html`` (see the module docstring); never fires."""

    def __init__(
        self,
        base_trial: Any,
        action_str: str | Sequence[Any] | None = "",
        other_trials: Sequence[Any] | None = None,
        *,
        output_uri: Any = None,
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        reject_unknown(self.rule_name, extra, ("output_uri",))
        self.output_uri: str | None = str(output_uri) if output_uri else os.environ.get("MURPHY_RESULT_PATH")
        self.metrics: dict[str, list[tuple[int, float]]] = {}
        self.importance: dict[str, dict[str, float]] = {}
        self.importance_step: int | None = None
        self.hyperparameters: dict[str, str] = {}
        self.confusion: tuple[int, list[list[int]]] | None = None
        self.depths: list[tuple[int, float]] = []
        self.html = ""
        self.reports_written = 0
        self.worker: str | None = None  # the worker reported, with several
        self._view: WorkerView | None = None

    def _reported_trial(self) -> Any:
        """The trial itself, or with several workers (the series rules' choice of which are
        several) its first worker's view."""
        if self._view is not None:
            return self._view
        workers = series_workers(self.base_trial)
        if not workers:
            return self.base_trial
        self.worker = workers[0]
        self._view = WorkerView(self.base_trial, workers[0])
        return self._view

    def invoke_at_step(self, step: int) -> bool:
        trial = self._reported_trial()
        if isinstance(trial, WorkerView) and not trial.wrote(step):
            return False
        names = trial.tensor_names(step=step)
        importance: dict[str, dict[str, float]] = {}
        for name in names:
            value = value_at(trial, name, step)
            if value is None or not value.size:
                continue
            if name.startswith(_HYPER):
                self.hyperparameters.setdefault(name[len(_HYPER):], _text(value))
            elif (m := _IMPORTANCE.match(name)) is not None:
                importance.setdefault(m.group(1), {})[m.group(2)] = first_value(value)
            elif split_metric(name) is not None and value.size <= 2 and value.dtype.kind in "fiu":
                self.metrics.setdefault(name, []).append((step, first_value(value)))
        if importance:
            self.importance, self.importance_step = importance, step
        self._confusion(step, names)
        self._depth(step, names)
        self._write(step)
        return False

    def _confusion(self, step: int, names: list[str]) -> None:
        if "labels" not in names or "predictions" not in names:
            return
        trial = self._reported_trial()
        labels, preds = value_at(trial, "labels", step), value_at(trial, "predictions", step)
        if labels is None or preds is None:
            return
        lab, pred = class_indices(labels, preds, argmax=False)
        if pred is None or not lab.size:
            return
        k = int(max(lab.max(), pred.max()) + 1) if preds.ndim == labels.ndim else int(preds.shape[-1])
        cm = np.zeros((k, k), dtype=np.int64)
        np.add.at(cm, (np.clip(lab, 0, k - 1), np.clip(pred, 0, k - 1)), 1)
        self.confusion = (step, cm.tolist())

    def _depth(self, step: int, names: list[str]) -> None:
        if "trees/Node" not in names:
            return
        trial = self._reported_trial()
        nodes = value_at(trial, "trees/Node", step)
        trees = value_at(trial, "trees/Tree", step) if "trees/Tree" in names else None
        if nodes is not None and nodes.size:
            self.depths.append((step, float(max(TreeDepth.tree_depths(nodes, trees).values()))))

    def _write(self, step: int) -> None:
        self.html = self.render(step)
        if self.output_uri:
            open_store(self.output_uri).put(REPORT_FILE, self.html.encode("utf-8"))
        self.reports_written += 1

    def render(self, step: int) -> str:
        """The whole report as of ``step``."""
        sections = [f"<h1>XGBoost training report</h1><p>Up to step {step}; written "
                    f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M:%S')} UTC by murphy's "
                    "CreateXgboostReport rule.</p>"]
        if self.worker is not None:
            sections.append(f"<p>Worker {escape(self.worker)} (rank 0) of a multi-worker job: distributed "
                            "XGBoost trains one model on every worker, so the others report the same.</p>")
        if self.hyperparameters:
            rows = "".join(f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>" for k, v in sorted(self.hyperparameters.items()))
            sections.append(f"<h2>Hyperparameters</h2><table>{rows}</table>")
        sections.append("<h2>Metrics</h2>" + (_svg.line_chart(self.metrics, "metrics over boosting rounds")
                                              if self.metrics else "<p>No metrics saved.</p>"))
        sections.append("<h2>Feature importance</h2>")
        if self.importance:
            sections.append(f"<p>At step {self.importance_step}, normalised.</p>")
            sections.extend(_svg.bar_chart(v, f"importance: {t}") for t, v in sorted(self.importance.items()))
        else:
            sections.append("<p>No feature importance saved.</p>")
        sections.append("<h2>Confusion matrix</h2>")
        if self.confusion is not None:
            cstep, cm = self.confusion
            sections.append(f"<p>Validation labels and predictions at step {cstep}.</p>" + _svg.matrix(cm, "confusion"))
        else:
            sections.append("<p>No labels and predictions saved.</p>")
        sections.append("<h2>Tree depth</h2>" + (_svg.line_chart({"deepest tree": self.depths}, "deepest tree per round")
                                                 if self.depths else "<p>No trees saved.</p>"))
        style = "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td{border:1px solid #ccc;padding:2px 8px}"
        return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>XGBoost training report</title>"
                f"<style>{style}</style></head><body>{''.join(sections)}</body></html>")


def _text(value: np.ndarray[Any, Any]) -> str:
    flat = value.reshape(-1).tolist()
    return str(flat[0]) if len(flat) == 1 else ", ".join(map(str, flat))
