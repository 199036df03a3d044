"""Overfit: the validation loss runs away from the training loss."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from murphy.core.modes import ModeKeys
from murphy.rules.builtin._common import (
    checked_regexes,
    fmt,
    loss_names,
    reject_unknown,
    require,
    scalar,
)
from murphy.rules.params import as_float, as_int
from murphy.rules.rule import Rule


class Overfit(Rule):
    """Fires when ``(mean val loss - mean train loss) / |mean train loss| > ratio_threshold``
    at ``patience`` consecutive evaluations.

    The rule evaluates at every EVAL step ``>= start_step`` (global) where a loss was saved.
    *Mean val loss* is the mean over the current evaluation run (the EVAL saves since the last
    TRAIN save); *mean train loss* is the mean over the latest training run before it (the
    consecutive TRAIN saves ending at the last TRAIN save). Losses are the tensors matching
    ``tensor_regex``, else the ``losses`` collection; each loss tensor is judged on its own.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str = "",
        *,
        other_trials: Sequence[Any] | None = None,
        tensor_regex: Any = None,
        start_step: Any = "0",
        patience: Any = "1",
        ratio_threshold: Any = "0.1",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        n = self.rule_name
        reject_unknown(n, extra, ("tensor_regex", "start_step", "patience", "ratio_threshold"))
        self.tensor_regex = checked_regexes(tensor_regex, "tensor_regex", n)
        self.start_step = as_int(start_step, "start_step", n)
        self.patience = as_int(patience, "patience", n)
        require(self.patience >= 1, n, "patience", patience, ">= 1")
        self.ratio_threshold = as_float(ratio_threshold, "ratio_threshold", n)
        self._strikes: dict[str, int] = {}

    def _runs(self, name: str, step: int) -> tuple[list[float], list[float]]:
        """(val losses of the current eval run, train losses of the latest train run)."""
        trial = self.base_trial
        tensor = trial.tensor(name)
        saved = tensor.steps()
        i = bisect.bisect_right(saved, step) - 1
        runs: dict[ModeKeys, list[float]] = {ModeKeys.EVAL: [], ModeKeys.TRAIN: []}
        phase = ModeKeys.EVAL
        while i >= 0:
            mode = trial.mode(saved[i])
            if mode is not phase:
                if phase is ModeKeys.TRAIN and runs[ModeKeys.TRAIN]:
                    break
                if phase is ModeKeys.EVAL and mode is ModeKeys.TRAIN:
                    phase = ModeKeys.TRAIN
            if mode is phase:
                runs[phase].append(scalar(tensor.value(saved[i])))
            i -= 1
        return runs[ModeKeys.EVAL], runs[ModeKeys.TRAIN]

    def invoke_at_step(self, step: int) -> bool:
        trial = self.base_trial
        if step < self.start_step or trial.mode(step) is not ModeKeys.EVAL:
            return False
        names = loss_names(trial, None, self.tensor_regex, use_losses_collection=not self.tensor_regex)
        for name in names:
            if step not in trial.tensor(name).steps():
                continue
            val, train = self._runs(name, step)
            if not train:
                continue
            mean_val, mean_train = sum(val) / len(val), sum(train) / len(train)
            ratio = (mean_val - mean_train) / max(abs(mean_train), 1e-12)
            strikes = self._strikes[name] = self._strikes.get(name, 0) + 1 if ratio > self.ratio_threshold else 0
            if strikes >= self.patience:
                message = (
                    f"{self.rule_name}: loss {name} at step {step} (EVAL step {trial.mode_step(step)}): "
                    f"mean val loss {fmt(mean_val)} vs mean train loss {fmt(mean_train)}, ratio "
                    f"{fmt(ratio)} > threshold {fmt(self.ratio_threshold)} for {strikes} evaluation(s)"
                )
                return self.found(step, message, tensor=name, value=ratio)
        return False
