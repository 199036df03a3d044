"""WeightUpdateRatio: weight updates are far too large or far too small for the weights."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.core.modes import ModeKeys
from murphy.rules.builtin._common import (
    collection_names_at,
    fmt,
    layer_order,
    reject_unknown,
    require,
    value_at,
)
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import RuleParameterError, as_float, as_optional_int


class WeightUpdateRatio(EveryWorker):
    """Fires when ``ratio > large_threshold`` or ``ratio < small_threshold`` for a tensor of
    the ``weights`` collection, where

        ``ratio = ||w_s - w_p||_2 / (||w_p||_2 + epsilon)``

    (Frobenius norms over the whole tensor), ``w_s`` the weight at the current TRAIN step and
    ``w_p`` the weight at the previous one: ``num_steps`` TRAIN steps earlier when given (the
    step is skipped if that step was not saved), else the previous saved TRAIN step. EVAL and
    PREDICT steps are skipped (weights do not change there); a trial without modes counts
    GLOBAL steps as training.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str = "",
        *,
        other_trials: Sequence[Any] | None = None,
        num_steps: Any = None,
        large_threshold: Any = "10.0",
        small_threshold: Any = "0.00000001",
        epsilon: Any = "0.000000001",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        n = self.rule_name
        reject_unknown(n, extra, ("num_steps", "large_threshold", "small_threshold", "epsilon"))
        self.num_steps = as_optional_int(num_steps, "num_steps", n)
        require(self.num_steps is None or self.num_steps > 0, n, "num_steps", num_steps, "> 0")
        self.large_threshold = as_float(large_threshold, "large_threshold", n)
        self.small_threshold = as_float(small_threshold, "small_threshold", n)
        if self.small_threshold > self.large_threshold:
            raise RuleParameterError(
                f"{n}: small_threshold={small_threshold!r} must not exceed large_threshold={large_threshold!r}"
            )
        self.epsilon = as_float(epsilon, "epsilon", n)
        require(self.epsilon >= 0, n, "epsilon", epsilon, ">= 0")

    def _previous(self, name: str, mode: ModeKeys, s: int) -> int | None:
        if self.num_steps is not None:
            prev = s - self.num_steps
            return prev if prev >= 0 else None
        saved = self.base_trial.tensor(name).steps(mode=mode)
        i = bisect.bisect_left(saved, s)
        return saved[i - 1] if i > 0 else None

    def invoke_worker_step(self, step: int) -> bool:
        trial = self.base_trial
        mode, s = trial.mode_modestep(step)
        if mode in (ModeKeys.EVAL, ModeKeys.PREDICT) or mode is None or s is None:
            return False
        for name in layer_order(trial, collection_names_at(trial, "weights", step), step):
            prev = self._previous(name, mode, s)
            prev_global = None if prev is None else trial.global_step(mode, prev)
            if prev_global is None:
                continue
            now, before = value_at(trial, name, step), value_at(trial, name, prev_global)
            if now is None or before is None or now.shape != before.shape:
                continue
            delta = float(np.linalg.norm((now.astype(np.float64) - before).ravel()))
            ratio = delta / (float(np.linalg.norm(before.astype(np.float64).ravel())) + self.epsilon)
            if ratio > self.large_threshold or ratio < self.small_threshold:
                which = (f"> large_threshold {fmt(self.large_threshold)}" if ratio > self.large_threshold
                         else f"< small_threshold {fmt(self.small_threshold)}")
                message = (
                    f"{self.rule_name}: weight {name} update ratio ||w_{step} - w_{prev_global}|| / "
                    f"||w_{prev_global}|| = {fmt(ratio)} at step {step} {which}"
                )
                return self.found(step, message, tensor=name, value=ratio)
        return False
