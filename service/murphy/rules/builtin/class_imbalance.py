"""ClassImbalance: the label distribution is too skewed, or one class is mispredicted far more
than the others. Also home of :func:`class_indices`, shared with Confusion."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.rules.builtin._common import (
    Array,
    checked_regexes,
    fmt,
    layer_order,
    reject_unknown,
    require,
    step_label,
    value_at,
)
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import as_bool, as_float, as_int

_ACCEPTED = (
    "threshold_imbalance", "threshold_misprediction", "samples", "argmax",
    "labels_regex", "predictions_regex",
)
# A class needs this many samples in the window before its misprediction fraction counts:
# one or two unlucky samples are not evidence.
MIN_CLASS_SAMPLES = 10
# A class is underrepresented when the most frequent class has at least this many times its
# labels (counted over every label seen; sampling noise on >= ``samples`` labels of a balanced
# set stays far below 2x).
UNDERREPRESENTED = 2


def class_indices(labels: Array, predictions: Array | None, argmax: bool) -> tuple[Array, Array | None]:
    """Flat integer class ids from a labels tensor and an optional predictions tensor.

    Predictions are per-class scores (argmax over the last axis) when they have one more axis
    than the labels (logits next to class-id labels), or when ``argmax`` is set and they have
    at least two axes. Labels are one-hot (argmax too) when ``argmax`` is set and they have the
    predictions' (at least 2-D) shape. Otherwise
    values are rounded to integers. Predictions whose size does not match the labels' are
    dropped (returned as None).
    """
    lab, pred = np.asarray(labels), None if predictions is None else np.asarray(predictions)
    if pred is not None:
        scores = pred.ndim == lab.ndim + 1 or (argmax and pred.ndim >= 2)
        if argmax and lab.ndim >= 2 and lab.shape == pred.shape:
            lab = lab.argmax(axis=-1)
        if scores:
            pred = pred.argmax(axis=-1)
    lab_ids = np.rint(lab.astype(np.float64)).astype(np.int64).reshape(-1)
    if pred is None:
        return lab_ids, None
    pred_ids = np.rint(pred.astype(np.float64)).astype(np.int64).reshape(-1)
    return lab_ids, (pred_ids if pred_ids.size == lab_ids.size else None)


class ClassImbalance(EveryWorker):
    """Fires when, once ``samples`` labels have been seen, the class counts are imbalanced or
    one class is mispredicted far more than the rest.

    Labels and predictions are the first tensor (in layer order) saved at the step whose name
    matches ``labels_regex`` / ``predictions_regex``; see :func:`class_indices` for how scores
    and one-hot values become class ids. Each global step is counted once.

    - **Imbalance**: labels are counted cumulatively over every evaluated step (the data set's
      class distribution). With ``n_max``/``n_min`` the largest/smallest count among classes
      seen at least once, it fires when ``n_max / n_min > threshold_imbalance``. (A class never
      seen cannot be counted: the number of classes is not known.)
    - **Misprediction**: over the most recent ``samples`` (label, prediction) pairs (a sliding
      window, so it follows the current model, not the untrained one), class ``c``'s fraction
      is ``#(label=c, prediction≠c) / #(label=c)``. Only *underrepresented* classes are judged
      (AWS: "too many mispredictions for underrepresented classes ... as a result of the
      imbalance"): the most frequent class has at least twice as many labels, counted over
      every label seen. A neglected class of a balanced data set is Confusion's finding, not
      an imbalance: on balanced healthy runs of ``benchmarks/rule_quality`` a model still
      learning ignored one class for 10-50 steps and fired. It fires when that fraction is
      ``> threshold_misprediction`` while the misprediction fraction of all other classes'
      samples together is ``<= 1 - threshold_misprediction`` (the rest are predicted right at
      least as often as this class is predicted wrong), for a class with at least 10 samples
      in the window. The contrast makes the rule about one class being neglected (what
      imbalance causes), not about a model that is still bad early in training: an earlier
      "twice the others' fraction" contrast fired at step 3-9 of healthy balanced runs in
      ``benchmarks/rule_quality``, where an untrained model ignores one class while being
      wrong about the others ~45 % of the time.

    Nothing is evaluated until ``samples`` labels were counted.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str | Sequence[Any] | None = "",
        other_trials: Sequence[Any] | None = None,
        *,
        threshold_imbalance: Any = "10",
        threshold_misprediction: Any = "0.7",
        samples: Any = "500",
        argmax: Any = "False",
        labels_regex: Any = ".*labels",
        predictions_regex: Any = ".*predictions",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        name = self.rule_name
        reject_unknown(name, extra, _ACCEPTED)
        self.threshold_imbalance = as_float(threshold_imbalance, "threshold_imbalance", name)
        require(self.threshold_imbalance >= 1, name, "threshold_imbalance", threshold_imbalance, ">= 1")
        self.threshold_misprediction = as_float(threshold_misprediction, "threshold_misprediction", name)
        require(
            0 <= self.threshold_misprediction <= 1, name, "threshold_misprediction",
            threshold_misprediction, "a fraction between 0 and 1",
        )
        self.samples = as_int(samples, "samples", name)
        require(self.samples >= 1, name, "samples", samples, "an integer >= 1")
        self.argmax = as_bool(argmax, "argmax", name)
        self.labels_regex = checked_regexes(labels_regex, "labels_regex", name) or [".*labels"]
        self.predictions_regex = checked_regexes(predictions_regex, "predictions_regex", name) or [
            ".*predictions"
        ]
        self.counts: Counter[int] = Counter()
        self._window: deque[tuple[Array, Array]] = deque()
        self._window_size = 0
        self._counted: set[int] = set()

    def _first(self, regexes: list[str], step: int) -> tuple[str, Array] | None:
        names = self.base_trial.tensor_names(step=step, regex=regexes)
        for tname in layer_order(self.base_trial, names, step):
            value = value_at(self.base_trial, tname, step)
            if value is not None and value.size:
                return tname, value
        return None

    def _count(self, step: int) -> str | None:
        """Add the step's labels (and predictions) once; the labels tensor's name."""
        labels = self._first(self.labels_regex, step)
        if labels is None:
            return None
        if step in self._counted:
            return labels[0]
        self._counted.add(step)
        preds = self._first(self.predictions_regex, step)
        lab, pred = class_indices(labels[1], None if preds is None else preds[1], self.argmax)
        self.counts.update(lab.tolist())
        if pred is not None:
            self._window.append((lab, pred))
            self._window_size += lab.size
            while self._window and self._window_size - self._window[0][0].size >= self.samples:
                self._window_size -= self._window.popleft()[0].size
        return labels[0]

    def invoke_worker_step(self, step: int) -> bool:
        tname = self._count(step)
        total = sum(self.counts.values())
        if tname is None or total < self.samples:
            return False
        where = f"{step_label(self.base_trial, step)} ({total} labels of {tname!r} seen)"
        (c_max, n_max), (c_min, n_min) = self.counts.most_common()[0], self.counts.most_common()[-1]
        ratio = n_max / n_min
        if ratio > self.threshold_imbalance:
            return self.found(
                step,
                f"class {c_max} has {n_max} labels and class {c_min} only {n_min}: ratio "
                f"{fmt(ratio)} > threshold_imbalance {fmt(self.threshold_imbalance)} at {where}",
                tensor=tname, value=ratio,
            )
        return self._mispredicted(step, tname, where)

    def _mispredicted(self, step: int, tname: str, where: str) -> bool:
        if self._window_size < self.samples:
            return False
        lab = np.concatenate([lab for lab, _ in self._window])
        wrong = lab != np.concatenate([pred for _, pred in self._window])
        n_max = self.counts.most_common(1)[0][1]
        for cls in np.unique(lab).tolist():
            mine = lab == cls
            n = int(mine.sum())
            rest = int((~mine).sum())
            if n < MIN_CLASS_SAMPLES or self.counts[cls] * UNDERREPRESENTED > n_max:
                continue
            frac = float(wrong[mine].mean())
            rest_frac = float(wrong[~mine].mean()) if rest else 0.0
            if frac > self.threshold_misprediction and rest_frac <= 1 - self.threshold_misprediction:
                return self.found(
                    step,
                    f"class {cls} is mispredicted in {fmt(frac)} of its {n} most recent samples "
                    f"(> threshold_misprediction {fmt(self.threshold_misprediction)}; other "
                    f"classes: {fmt(rest_frac)}) at {where}",
                    tensor=tname, value=frac,
                )
        return False
