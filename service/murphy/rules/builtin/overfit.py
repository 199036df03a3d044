"""Overfit: the validation loss runs away from the training loss."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.core.modes import ModeKeys
from murphy.rules.builtin._common import (
    checked_regexes,
    fmt,
    loss_names,
    reject_unknown,
    require,
    scalar,
)
from murphy.rules.builtin._metric_pairs import first_value, validation_pairs
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import as_float, as_int

# The val-train gap must exceed this many standard errors of the mean train loss.
NOISE_SE = 3.0
# XGBoost pairs: the validation metric must be this fraction above its lowest value so far.
VAL_RISE = 0.001


class Overfit(EveryWorker):
    """Fires when ``(mean val loss - mean train loss) / |mean train loss| > ratio_threshold``
    at ``patience`` consecutive evaluations.

    An *evaluation pass* is a run of consecutive EVAL saves of the loss; it is judged once,
    when complete: at its last EVAL step if the loss's next saved step is already known (or
    training has ended), else at the first TRAIN step after it (the finding then has that
    step). Passes ending before ``start_step`` (global) are skipped. *Mean val loss* is the
    mean over all batches of the pass; *mean train loss* the mean over the TRAIN saves since
    the previous pass (the consecutive TRAIN saves before it). Losses are the tensors matching
    ``tensor_regex``, else the ``losses`` collection; each loss tensor is judged on its own.

    A pass counts as over the threshold only when, in addition, the gap ``mean val - mean
    train`` exceeds 3 standard errors of the mean train loss (``3 * std(train) / sqrt(n)``,
    sample std over the ``n`` training saves; no such guard with one save). Training losses
    are minibatch losses: over 5 saves of 128 samples their mean moves by ~6 % from batch
    noise alone, and a converged healthy model (val ~= train) crossed 10 % at one evaluation
    in a third of the healthy runs of ``benchmarks/rule_quality``. A real train/val gap
    (memorised training data) is many standard errors wide.

    XGBoost runs have no modes: their GLOBAL metrics ``train-<m>`` / ``validation-<m>`` (see
    ``_metric_pairs``) are judged at every step where both were saved, with ``train`` and
    ``val`` the two metrics' values (whole-data-set metrics, no batch noise). A step counts as
    over the threshold when the ratio exceeds ``ratio_threshold`` *and* the validation metric
    is more than 0.1 % above its lowest value so far: boosting drives the training metric
    towards 0, so the ratio alone grows on every healthy run; overfitting is the gap growing
    while the validation metric gets worse (the point where early stopping would stop).
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
        self._judged: dict[str, set[int]] = {}
        self._val_low: dict[str, float] = {}

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

    def _pass_end(self, name: str, step: int) -> int | None:
        """The last step of the evaluation pass to judge at ``step``, or None.

        At an EVAL step: itself, once the pass is known to be complete (the loss's next saved
        step is not EVAL, or training has ended with it). At a TRAIN step: the EVAL step just
        before it (a pass whose completeness was not yet known when its last step was seen).
        """
        trial = self.base_trial
        saved: list[int] = trial.tensor(name).steps()
        i = bisect.bisect_left(saved, step)
        if i >= len(saved) or saved[i] != step:
            return None
        mode = trial.mode(step)
        if mode is ModeKeys.EVAL:
            if i + 1 < len(saved):
                return step if trial.mode(saved[i + 1]) is not ModeKeys.EVAL else None
            return step if trial.loaded_all_steps else None
        if i > 0 and trial.mode(saved[i - 1]) is ModeKeys.EVAL:
            return saved[i - 1]
        return None

    def invoke_worker_step(self, step: int) -> bool:
        trial = self.base_trial
        if step < self.start_step:
            return False
        names = loss_names(trial, None, self.tensor_regex, use_losses_collection=not self.tensor_regex)
        if trial.mode(step) is ModeKeys.GLOBAL:
            return self._invoke_pairs(step, names)
        if trial.mode(step) not in (ModeKeys.EVAL, ModeKeys.TRAIN):
            return False
        for name in names:
            end = self._pass_end(name, step)
            if end is None or end < self.start_step or end in self._judged.setdefault(name, set()):
                continue
            self._judged[name].add(end)
            val, train = self._runs(name, end)
            if not train:
                continue
            if self._judge(name, step, end, val, train):
                return True
        return False

    def _invoke_pairs(self, step: int, names: list[str]) -> bool:
        """XGBoost: judge each train/validation metric pair saved at ``step``."""
        trial = self.base_trial
        for train_name, val_name in validation_pairs(names):
            if step not in trial.tensor(train_name).steps() or step not in trial.tensor(val_name).steps():
                continue
            if step in self._judged.setdefault(val_name, set()):
                continue
            self._judged[val_name].add(step)
            train = first_value(trial.tensor(train_name).value(step))
            val = first_value(trial.tensor(val_name).value(step))
            low = self._val_low.get(val_name)
            self._val_low[val_name] = val if low is None else min(low, val)
            ratio = (val - train) / max(abs(train), 1e-12)
            rising = low is not None and val > low + abs(low) * VAL_RISE
            over = ratio > self.ratio_threshold and rising
            strikes = self._strikes[val_name] = self._strikes.get(val_name, 0) + 1 if over else 0
            if strikes >= self.patience:
                assert low is not None
                message = (
                    f"{self.rule_name}: at step {step} {val_name} = {fmt(val)} vs {train_name} = "
                    f"{fmt(train)}, ratio {fmt(ratio)} > threshold {fmt(self.ratio_threshold)}, and "
                    f"{val_name} is above its lowest value {fmt(low)} for {strikes} save(s): the "
                    f"model fits the training data better while validation gets worse"
                )
                return self.found(step, message, tensor=val_name, value=ratio)
        return False

    def _judge(self, name: str, step: int, end: int, val: list[float], train: list[float]) -> bool:
        mean_val, mean_train = sum(val) / len(val), sum(train) / len(train)
        ratio = (mean_val - mean_train) / max(abs(mean_train), 1e-12)
        noise = NOISE_SE * float(np.std(train, ddof=1)) / len(train) ** 0.5 if len(train) > 1 else 0.0
        over = ratio > self.ratio_threshold and mean_val - mean_train > noise
        strikes = self._strikes[name] = self._strikes.get(name, 0) + 1 if over else 0
        if strikes < self.patience:
            return False
        trial = self.base_trial
        message = (
            f"{self.rule_name}: loss {name} at step {end} (EVAL step {trial.mode_step(end)}, "
            f"{len(val)} evaluation batch(es)): mean val loss {fmt(mean_val)} vs mean train loss "
            f"{fmt(mean_train)} over {len(train)} training saves, ratio {fmt(ratio)} > threshold "
            f"{fmt(self.ratio_threshold)} for {strikes} evaluation(s)"
        )
        return self.found(step, message, tensor=name, value=ratio)
