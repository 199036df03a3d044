"""Confusion: the confusion matrix of (labels, predictions) at a step is too far from
diagonal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.rules.builtin._common import (
    Array,
    collection_names_at,
    fmt,
    layer_order,
    reject_unknown,
    require,
    step_label,
    value_at,
)
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.builtin.class_imbalance import class_indices
from murphy.rules.params import RuleParameterError, as_float, as_optional_int

_ACCEPTED = (
    "category_no", "labels", "predictions", "labels_collection", "predictions_collection",
    "min_diag", "max_off_diag",
)
# A predicted class needs this many samples at the step before its column is judged.
MIN_COLUMN_SAMPLES = 5


class Confusion(EveryWorker):
    """Fires at the first step whose confusion matrix violates the diagonal/off-diagonal bounds.

    At each step where both are saved, the labels tensor is the one named ``labels`` (else the
    first tensor, in layer order, of ``labels_collection``), likewise for predictions; scores
    are turned into class ids as in :func:`class_imbalance.class_indices` (argmax over the last
    axis when predictions have one more axis than labels). ``cm[l][p]`` counts the step's
    samples with label ``l`` and prediction ``p``; ``category_no`` is the matrix size, inferred
    when not given as the predictions' score width, else ``max(label, prediction) + 1``.

    For each predicted class ``i`` (column) with at least 5 samples at the step:
    ``cm[i][i] / Σ_j cm[j][i] >= min_diag`` and, for every ``j != i``,
    ``cm[j][i] / Σ_j cm[j][i] <= max_off_diag``; the first violation fires. AWS's docs write
    the diagonal denominator as ``Σ_j cm[j][j]`` (the trace), under which any balanced
    classifier with more than one class would fail ``min_diag=0.9``; the column sum is used for
    both checks, so ``min_diag`` bounds each class's precision and ``max_off_diag`` the share
    of a column taken by one wrong class. The matrix is per step (the model as it is now).
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str | Sequence[Any] | None = "",
        other_trials: Sequence[Any] | None = None,
        *,
        category_no: Any = None,
        labels: Any = "labels",
        predictions: Any = "predictions",
        labels_collection: Any = "labels",
        predictions_collection: Any = "predictions",
        min_diag: Any = "0.9",
        max_off_diag: Any = "0.1",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        name = self.rule_name
        reject_unknown(name, extra, _ACCEPTED)
        self.category_no = as_optional_int(category_no, "category_no", name)
        if self.category_no is not None:
            require(self.category_no >= 2, name, "category_no", category_no, "an integer >= 2")
        self.labels = str(labels or "labels")
        self.predictions = str(predictions or "predictions")
        self.labels_collection = str(labels_collection or "labels")
        self.predictions_collection = str(predictions_collection or "predictions")
        self.min_diag = as_float(min_diag, "min_diag", name)
        require(0 <= self.min_diag <= 1, name, "min_diag", min_diag, "a fraction between 0 and 1")
        self.max_off_diag = as_float(max_off_diag, "max_off_diag", name)
        require(0 <= self.max_off_diag <= 1, name, "max_off_diag", max_off_diag, "a fraction between 0 and 1")

    def _tensor(self, tname: str, collection: str, step: int) -> tuple[str, Array] | None:
        names = self.base_trial.tensor_names(step=step)
        candidates = [tname] if tname in names else []
        candidates += layer_order(self.base_trial, collection_names_at(self.base_trial, collection, step), step)
        for cand in candidates:
            value = value_at(self.base_trial, cand, step)
            if value is not None and value.size:
                return cand, value
        return None

    def matrix(self, labels: Array, predictions: Array) -> Array:
        """The confusion matrix ``cm[label][prediction]`` of one step's tensors."""
        lab, pred = class_indices(labels, predictions, argmax=False)
        if pred is None:
            raise RuleParameterError(
                f"{self.rule_name}: labels ({labels.shape}) and predictions ({predictions.shape}) "
                "do not pair up sample by sample"
            )
        n = self.category_no
        if n is None:
            scores = predictions.ndim == labels.ndim + 1
            n = int(predictions.shape[-1]) if scores else int(max(lab.max(), pred.max())) + 1
        bad = lab[(lab < 0) | (lab >= n)].tolist() + pred[(pred < 0) | (pred >= n)].tolist()
        if bad:
            raise RuleParameterError(
                f"{self.rule_name}: class id {bad[0]} is outside 0..{n - 1} (category_no={n})"
            )
        cm = np.zeros((n, n), dtype=np.int64)
        np.add.at(cm, (lab, pred), 1)
        return cm

    def invoke_worker_step(self, step: int) -> bool:
        labels = self._tensor(self.labels, self.labels_collection, step)
        preds = self._tensor(self.predictions, self.predictions_collection, step)
        if labels is None or preds is None:
            return False
        cm = self.matrix(labels[1], preds[1])
        where = f"{step_label(self.base_trial, step)} ({labels[0]!r} vs {preds[0]!r})"
        for i in range(cm.shape[0]):
            col = int(cm[:, i].sum())
            if col < MIN_COLUMN_SAMPLES:
                continue
            diag = cm[i, i] / col
            if diag < self.min_diag:
                return self.found(
                    step,
                    f"only {fmt(diag)} of the {col} samples predicted as class {i} are class {i}: "
                    f"cm[{i}][{i}]/column < min_diag {fmt(self.min_diag)} at {where}",
                    tensor=preds[0], value=float(diag),
                )
            for j in range(cm.shape[0]):
                off = cm[j, i] / col
                if j != i and off > self.max_off_diag:
                    return self.found(
                        step,
                        f"{fmt(off)} of the {col} samples predicted as class {i} are class {j}: "
                        f"cm[{j}][{i}]/column > max_off_diag {fmt(self.max_off_diag)} at {where}",
                        tensor=preds[0], value=float(off),
                    )
        return False
