"""SimilarAcrossRuns: a tensor differs between this run and another run at the same step."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.exceptions import NoMoreData, StepUnavailable
from murphy.rules.builtin._common import (
    Array,
    checked_regexes,
    fmt,
    optional_list,
    reject_unknown,
    selected_in_layer_order,
    step_label,
    value_at,
)
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import RuleParameterError
from murphy.trial import StepState, create_trial

_ACCEPTED = ("collection_names", "tensor_regex", "other_trials", "other_trial_<i>")
_OTHER_TRIAL = re.compile(r"^other_trial_(\d+)$")
RTOL = 1e-5
ATOL = 1e-8


def max_abs_diff(a: Array, b: Array) -> float:
    """Largest ``|a - b|`` over finite differences (inf when shapes differ or NaNs mismatch)."""
    if a.shape != b.shape:
        return float("inf")
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    nan_mismatch = np.isnan(a.astype(np.float64)) != np.isnan(b.astype(np.float64))
    if nan_mismatch.any():
        return float("inf")
    finite = diff[np.isfinite(diff)]
    return float(finite.max()) if finite.size else 0.0


class SimilarAcrossRuns(EveryWorker):
    """Fires at the first step where a selected tensor of the base trial differs from the same
    tensor at the same global step of one of ``other_trials``.

    "Differs" means ``not np.allclose(base, other, rtol=1e-5, atol=1e-8, equal_nan=True)`` or
    different shapes: float32 noise from a different reduction order passes, a different seed,
    learning rate or data order does not. Only tensors selected by ``collection_names`` /
    ``tensor_regex`` (all when neither) and saved in both trials at the step are compared, in
    the base trial's layer order; the value reported is the largest absolute difference.

    The other trials arrive as ``other_trials=[trial, ...]`` (the runner builds them from the
    ``other_trial_<i>`` RuleParameters); without them the rule opens the ``other_trial_<i>``
    paths it was given itself; with neither it is a parameter error. When another trial has not
    yet written the step, the rule waits for it (``wait_for_steps``, bounded by that trial's
    ``no_marker_timeout``); a step the other trial skipped or never reached is not compared.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str | Sequence[Any] | None = "",
        other_trials: Sequence[Any] | None = None,
        *,
        collection_names: Any = None,
        tensor_regex: Any = None,
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        name = self.rule_name
        reject_unknown(name, extra, _ACCEPTED)
        if not self.other_trials:
            self.other_trials = self._open_other_trials(extra)
            self.trials = [self.base_trial, *self.other_trials]
        if not self.other_trials:
            raise RuleParameterError(
                f"{name}: needs at least one other trial to compare with (RuleParameters "
                "other_trial_0, other_trial_1, ...: the other runs' debug output paths)"
            )
        self.collection_names = optional_list(collection_names, "collection_names", name)
        self.tensor_regex = checked_regexes(tensor_regex, "tensor_regex", name)

    @staticmethod
    def _open_other_trials(params: dict[str, Any]) -> list[Any]:
        """Trials from ``other_trial_<i>`` paths, when the caller passed paths, not trials."""
        keyed = [(int(k.rsplit("_", 1)[1]), v) for k, v in params.items() if _OTHER_TRIAL.match(k)]
        return [create_trial(str(path)) for _, path in sorted(keyed) if path]

    @staticmethod
    def _has_step(trial: Any, step: int) -> bool:
        state = trial.has_passed_step(step)
        if state is StepState.NOT_YET_AVAILABLE:
            try:
                trial.wait_for_steps([step])
            except (NoMoreData, StepUnavailable):
                return False
            return True
        return state is StepState.AVAILABLE

    def invoke_worker_step(self, step: int) -> bool:
        names = selected_in_layer_order(self.base_trial, step, self.collection_names, self.tensor_regex)
        others = [t for t in self.other_trials if self._has_step(t, step)]
        for tname in names:
            base = value_at(self.base_trial, tname, step)
            if base is None:
                continue
            for other in others:
                theirs = value_at(other, tname, step) if other.has_tensor(tname) else None
                if theirs is None:
                    continue
                same = base.shape == theirs.shape and np.allclose(
                    base, theirs, rtol=RTOL, atol=ATOL, equal_nan=True
                )
                if same:
                    continue
                diff = max_abs_diff(base, theirs)
                shapes = "" if base.shape == theirs.shape else f" (shapes {base.shape} vs {theirs.shape})"
                return self.found(
                    step,
                    f"{tname!r} differs between {self.base_trial.name!r} and {other.name!r} at "
                    f"{step_label(self.base_trial, step)}: largest |difference| {fmt(diff)}"
                    f"{shapes} beyond rtol={fmt(RTOL)}, atol={fmt(ATOL)}",
                    tensor=tname, value=diff,
                )
        return False
