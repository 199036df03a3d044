"""UnchangedTensor: a tensor kept the same value over its last ``num_steps`` saved steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.core.modes import ModeKeys
from murphy.rules.builtin._common import (
    checked_regexes,
    fmt,
    optional_list,
    reject_unknown,
    require,
    selected_in_layer_order,
    step_label,
    value_at,
)
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import as_bool, as_float, as_int

_ACCEPTED = ("collection_names", "tensor_regex", "num_steps", "rtol", "atol", "equal_nan")


class UnchangedTensor(EveryWorker):
    """Fires at step ``s`` when a selected tensor saved at ``s`` has the same value at each of
    its last ``num_steps`` saved steps up to and including ``s``.

    Formula: with ``v_1 .. v_n`` the tensor's values at its ``n = num_steps`` most recent saved
    steps ``<= s`` (saved steps, not necessarily consecutive global steps), the condition is
    ``np.allclose(v_i, v_n, rtol, atol, equal_nan)`` for every ``i`` (and equal shapes). With
    fewer than ``num_steps`` saved steps there is no verdict yet. So three identical values at
    steps 0, 1, 2 with ``num_steps=3`` fire at step 2, not before.

    Tensors are checked in layer order; the first unchanged one is reported, with the largest
    absolute difference seen across the window as the value.

    Only training steps are judged, and windows hold training steps only: TRAIN steps (GLOBAL
    steps in a trial without modes). Parameters legitimately stay the same through an EVAL or
    PREDICT phase, so a window reaching into one would report every weight of a healthy run
    that saves during evaluation (found by ``benchmarks/rule_quality``: 3 consecutive EVAL
    saves of ``head.bias`` fired on a healthy run).
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str | Sequence[Any] | None = "",
        other_trials: Sequence[Any] | None = None,
        *,
        collection_names: Any = None,
        tensor_regex: Any = None,
        num_steps: Any = "3",
        rtol: Any = "1e-05",
        atol: Any = "1e-08",
        equal_nan: Any = "False",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        name = self.rule_name
        reject_unknown(name, extra, _ACCEPTED)
        self.collection_names = optional_list(collection_names, "collection_names", name)
        self.tensor_regex = checked_regexes(tensor_regex, "tensor_regex", name)
        self.num_steps = as_int(num_steps, "num_steps", name)
        require(self.num_steps >= 2, name, "num_steps", num_steps, "an integer >= 2")
        self.rtol = as_float(rtol, "rtol", name)
        require(self.rtol >= 0, name, "rtol", rtol, ">= 0")
        self.atol = as_float(atol, "atol", name)
        require(self.atol >= 0, name, "atol", atol, ">= 0")
        self.equal_nan = as_bool(equal_nan, "equal_nan", name)

    def _window(self, tname: str, step: int) -> list[int]:
        """The tensor's last ``num_steps`` saved training steps up to ``step`` (global steps)."""
        trial = self.base_trial
        mode, mode_step = trial.mode_modestep(step)
        if mode is None or mode is ModeKeys.GLOBAL:
            return list(trial.tensor(tname).prev_steps(step, self.num_steps))
        mode_steps = trial.tensor(tname).prev_steps(mode_step, self.num_steps, mode=mode)
        return [g for s in mode_steps if (g := trial.global_step(mode, s)) is not None]

    def _max_change(self, tname: str, step: int) -> float | None:
        """Largest |difference| to the value at ``step`` over the window; None if it changed."""
        window = self._window(tname, step)
        if len(window) < self.num_steps or window[-1] != step:
            return None
        last = value_at(self.base_trial, tname, step)
        if last is None:
            return None
        largest = 0.0
        for s in window[:-1]:
            other = value_at(self.base_trial, tname, s)
            if other is None or other.shape != last.shape:
                return None
            if not np.allclose(other, last, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan):
                return None
            diff = np.abs(other.astype(np.float64) - last.astype(np.float64))
            finite = diff[np.isfinite(diff)]
            if finite.size:
                largest = max(largest, float(finite.max()))
        return largest

    def invoke_worker_step(self, step: int) -> bool:
        if self.base_trial.mode(step) in (ModeKeys.EVAL, ModeKeys.PREDICT):
            return False
        names = selected_in_layer_order(self.base_trial, step, self.collection_names, self.tensor_regex)
        for tname in names:
            change = self._max_change(tname, step)
            if change is None:
                continue
            window = self._window(tname, step)
            return self.found(
                step,
                f"{tname!r} is unchanged over its last {self.num_steps} saved steps "
                f"{window} (up to {step_label(self.base_trial, step)}): largest difference "
                f"{fmt(change)} within rtol={fmt(self.rtol)}, atol={fmt(self.atol)}",
                tensor=tname,
                value=change,
            )
        return False
