"""FeatureImportanceOverweight: a few features carry almost all of an XGBoost model's
importance."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.rules.builtin._common import (
    checked_regexes,
    fmt,
    reject_unknown,
    require,
    scalar,
    step_label,
    value_at,
)
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import as_float, as_int

_ACCEPTED = ("threshold", "nfeatures", "tensor_regex")


class FeatureImportanceOverweight(EveryWorker):
    """Fires at the first step where the ``nfeatures`` largest normalised feature importances
    sum to more than ``threshold``.

    The importances are the scalar tensors saved at the step whose names match
    ``tensor_regex`` (the XGBoost hook writes ``feature_importance/<type>/<feature>``, one per
    feature). Formula: ``w_f = |v_f| / Σ_g |v_g|`` (the hook already normalises; doing it again
    is harmless), ``top = Σ of the nfeatures largest w_f``; fires when ``top > threshold``.
    With ``nfeatures`` or fewer features the top features are all of them (the sum is always 1),
    so there is no verdict then; nor when every importance is 0.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str | Sequence[Any] | None = "",
        other_trials: Sequence[Any] | None = None,
        *,
        threshold: Any = "0.8",
        nfeatures: Any = "3",
        tensor_regex: Any = ".*feature_importance/weight",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        name = self.rule_name
        reject_unknown(name, extra, _ACCEPTED)
        self.threshold = as_float(threshold, "threshold", name)
        require(0 <= self.threshold <= 1, name, "threshold", threshold, "a fraction between 0 and 1")
        self.nfeatures = as_int(nfeatures, "nfeatures", name)
        require(self.nfeatures >= 1, name, "nfeatures", nfeatures, "an integer >= 1")
        self.tensor_regex = checked_regexes(tensor_regex, "tensor_regex", name) or [
            ".*feature_importance/weight"
        ]

    def invoke_worker_step(self, step: int) -> bool:
        importances: dict[str, float] = {}
        for tname in self.base_trial.tensor_names(step=step, regex=self.tensor_regex):
            value = value_at(self.base_trial, tname, step)
            if value is not None and value.size and np.all(np.isfinite(value)):
                importances[tname] = abs(scalar(value))
        total = sum(importances.values())
        if len(importances) <= self.nfeatures or total <= 0:
            return False
        ranked = sorted(importances.items(), key=lambda kv: (-kv[1], kv[0]))[: self.nfeatures]
        top = sum(v for _, v in ranked) / total
        if top <= self.threshold:
            return False
        names = ", ".join(f"{n!r} ({fmt(v / total)})" for n, v in ranked)
        return self.found(
            step,
            f"the {self.nfeatures} most important of {len(importances)} features carry "
            f"{fmt(top)} of the importance at {step_label(self.base_trial, step)} (> threshold "
            f"{fmt(self.threshold)}): {names}",
            tensor=ranked[0][0], value=top,
        )
