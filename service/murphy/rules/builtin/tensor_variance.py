"""TensorVariance: a tensor's variance is above ``max_threshold`` or below ``min_threshold``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.exceptions import TensorUnavailable, TensorUnavailableForStep
from murphy.rules.builtin._common import (
    checked_regexes,
    fmt,
    optional_list,
    reject_unknown,
    scalar,
    selected_in_layer_order,
    step_label,
)
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import RuleParameterError, as_optional_float

_ACCEPTED = ("collection_names", "tensor_regex", "max_threshold", "min_threshold")


class TensorVariance(EveryWorker):
    """Fires at the first step where a selected tensor's variance is ``> max_threshold`` or
    ``< min_threshold``.

    Formula: ``var = np.var(x)`` over all elements of the raw value in float64 (population
    variance, ddof=0). When only reductions were saved, the stored ``variance`` reduction is
    used instead (the PyTorch hook stores torch's unbiased variance there). A non-finite
    variance is not compared (ExplodingTensor reports non-finite values). Tensors are checked in
    layer order and the first offending one is reported.

    At least one threshold is required: with neither there is nothing to check, so the rule
    refuses to start instead of silently never firing.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str | Sequence[Any] | None = "",
        other_trials: Sequence[Any] | None = None,
        *,
        collection_names: Any = None,
        tensor_regex: Any = None,
        max_threshold: Any = None,
        min_threshold: Any = None,
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        name = self.rule_name
        reject_unknown(name, extra, _ACCEPTED)
        self.collection_names = optional_list(collection_names, "collection_names", name)
        self.tensor_regex = checked_regexes(tensor_regex, "tensor_regex", name)
        self.max_threshold = as_optional_float(max_threshold, "max_threshold", name)
        self.min_threshold = as_optional_float(min_threshold, "min_threshold", name)
        if self.max_threshold is None and self.min_threshold is None:
            raise RuleParameterError(f"{name}: give max_threshold and/or min_threshold (both are unset)")
        if (
            self.max_threshold is not None
            and self.min_threshold is not None
            and self.min_threshold > self.max_threshold
        ):
            raise RuleParameterError(
                f"{name}: parameter min_threshold={self.min_threshold!r} must be <= "
                f"max_threshold={self.max_threshold!r}"
            )

    def _variance(self, tname: str, step: int) -> float | None:
        tensor = self.base_trial.tensor(tname)
        try:
            value = tensor.value(step)
        except TensorUnavailableForStep as exc:
            if not exc.has_reductions:
                return None
            try:
                return scalar(tensor.reduction_value(step, "variance"))
            except (TensorUnavailableForStep, TensorUnavailable):
                return None
        arr = np.asarray(value, dtype=np.float64)
        return float(np.var(arr)) if arr.size else None

    def invoke_worker_step(self, step: int) -> bool:
        names = selected_in_layer_order(self.base_trial, step, self.collection_names, self.tensor_regex)
        for tname in names:
            var = self._variance(tname, step)
            if var is None or not np.isfinite(var):
                continue
            where = f"{tname!r} at {step_label(self.base_trial, step)}"
            if self.max_threshold is not None and var > self.max_threshold:
                return self.found(
                    step,
                    f"variance of {where} is {fmt(var)} > max_threshold {fmt(self.max_threshold)}",
                    tensor=tname,
                    value=var,
                )
            if self.min_threshold is not None and var < self.min_threshold:
                return self.found(
                    step,
                    f"variance of {where} is {fmt(var)} < min_threshold {fmt(self.min_threshold)}",
                    tensor=tname,
                    value=var,
                )
        return False
