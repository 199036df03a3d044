"""Overtraining: the training or validation loss stopped improving."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from murphy.core.modes import ModeKeys
from murphy.rules.builtin._common import fmt, loss_names, reject_unknown, require, scalar
from murphy.rules.builtin._metric_pairs import first_value, validation_pairs
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import as_float, as_int


@dataclass
class _Best:
    loss: float
    last: int  # the last step counted, so that a step evaluated twice counts once
    since: int  # the step where this best was set
    stale: int = 0


@dataclass
class _Recent:
    """The latest raw training losses (the running-mean window) and the last step added."""

    values: deque[float]
    last: int = -1


class Overtraining(EveryWorker):
    """Fires when a loss has not improved by more than ``delta`` for a number of saved steps:
    ``patience_train`` TRAIN saves (GLOBAL saves count as training) or ``patience_validation``
    EVAL saves.

    Per (mode, loss tensor of the ``losses`` collection) the rule keeps the best loss; a save
    with ``loss < best - delta`` (``delta`` is absolute) is an improvement and resets the count,
    any other save adds one. It fires when the count reaches the patience. Steps are processed
    in order; a step seen before is not counted again.

    The *training* loss judged at a save is the running mean of the last ``patience_train``
    raw saves, judged only once there are that many (a mean of 1-2 noisy batches made the
    first save a "best" that later full means could not beat); the validation loss is judged
    raw. A training loss is one minibatch's loss, and its noise (+-20 % at batch 128) swamps
    ``delta`` as soon as saves are close together: against the single luckiest batch seen so
    far, healthy runs that were still improving fired within 5-60 steps in
    ``benchmarks/rule_quality``. A validation loss is usually a whole evaluation's mean
    already. On a loss that is truly flat the mean is flat
    too, so detection is as quick as on raw values; on a curve that flattens gradually it
    comes up to ``patience_train - 1`` saves later.

    A training plateau fires only if the model as a whole stopped improving: when the loss
    tensor also has EVAL saves, the validation loss must have reached no new minimum (any
    decrease counts) since the plateau began (the save that set the training best), and must
    have been evaluated at least once since. A training loss that flattens while the
    validation loss still goes down is a model still improving (slow batch-noise-dominated
    progress, or a small model near its floor), not overtraining: on the healthy runs of
    ``benchmarks/rule_quality`` (saves every step) the training-only criterion fired on 28
    of 33. The validation criterion (``patience_validation``) is judged on its own.

    XGBoost runs have no modes (GLOBAL saves): a metric ``<eval>-<m>`` whose evaluation set is
    not ``train`` and that has a ``train-<m>`` sibling (see ``_metric_pairs``) is the validation
    loss of that pair (judged raw, ``patience_validation``), and the training metric's plateau
    needs the sibling's agreement exactly as a TRAIN loss needs its EVAL saves.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str = "",
        *,
        other_trials: Sequence[Any] | None = None,
        patience_train: Any = "5",
        patience_validation: Any = "10",
        delta: Any = "0.01",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        n = self.rule_name
        reject_unknown(n, extra, ("patience_train", "patience_validation", "delta"))
        self.patience_train = as_int(patience_train, "patience_train", n)
        require(self.patience_train >= 1, n, "patience_train", patience_train, ">= 1")
        self.patience_validation = as_int(patience_validation, "patience_validation", n)
        require(self.patience_validation >= 1, n, "patience_validation", patience_validation, ">= 1")
        self.delta = as_float(delta, "delta", n)
        require(self.delta >= 0, n, "delta", delta, ">= 0")
        self._best: dict[tuple[ModeKeys, str], _Best] = {}
        self._recent: dict[str, _Recent] = {}
        # per loss: (lowest validation loss, its step, the latest EVAL step seen)
        self._val_low: dict[str, tuple[float, int, int]] = {}
        # XGBoost: validation metric -> its training sibling, training metric -> validation.
        self._val_of: dict[str, str] = {}
        self._train_of: dict[str, str] = {}

    def _running_mean(self, name: str, step: int, loss: float) -> float | None:
        """The mean of the last ``patience_train`` training saves; None until there are that many."""
        recent = self._recent.setdefault(name, _Recent(deque(maxlen=self.patience_train)))
        if step > recent.last:
            recent.values.append(loss)
            recent.last = step
        if len(recent.values) < self.patience_train:
            return None
        return sum(recent.values) / len(recent.values)

    def invoke_worker_step(self, step: int) -> bool:
        trial = self.base_trial
        mode = trial.mode(step) or ModeKeys.GLOBAL
        if mode is ModeKeys.PREDICT:
            return False
        names = loss_names(trial, None, None)
        if mode is ModeKeys.GLOBAL:
            for train_name, val_name in validation_pairs(names):
                self._val_of[val_name], self._train_of[train_name] = train_name, val_name
            # Validation metrics first: a training plateau at this step sees this evaluation.
            names.sort(key=lambda n: n not in self._val_of)
        for name in names:
            if step not in trial.tensor(name).steps():
                continue
            is_eval = mode is ModeKeys.EVAL or name in self._val_of
            if self._judge(name, step, ModeKeys.EVAL if is_eval else mode, is_eval):
                return True
        return False

    def _judge(self, name: str, step: int, mode: ModeKeys, is_eval: bool) -> bool:
        patience = self.patience_validation if is_eval else self.patience_train
        value = self.base_trial.tensor(name).value(step)
        raw = first_value(value) if name in self._val_of or name in self._train_of else scalar(value)
        if is_eval:
            self._note_validation(name, step, raw)
        mean = raw if is_eval else self._running_mean(name, step, raw)
        if mean is None:
            return False
        loss = mean
        best = self._best.get((mode, name))
        if best is None or loss < best.loss - self.delta:
            self._best[(mode, name)] = _Best(loss, step, step)
            return False
        if step <= best.last:
            return False
        best.last, best.stale = step, best.stale + 1
        if best.stale >= patience and (is_eval or self._validation_agrees(name, best.since)):
            kind = "validation" if is_eval else "training"
            message = (
                f"{self.rule_name}: {kind} loss {name} has not improved by more than "
                f"{fmt(self.delta)} for {best.stale} saved steps (patience {patience}) at step "
                f"{step}: {fmt(loss)} vs best {fmt(best.loss)}"
            )
            if not is_eval and ((ModeKeys.EVAL, name) in self._best or name in self._train_of):
                message += "; the validation loss has not improved since either"
            return self.found(step, message, tensor=name, value=loss)
        return False

    def _validation_agrees(self, name: str, plateau_start: int) -> bool:
        """Whether a training plateau that began at ``plateau_start`` counts: always for a loss
        without EVAL saves; otherwise only when the validation loss reached no new minimum
        since (its lowest value is older) and was evaluated at least once since."""
        sibling = self._train_of.get(name)
        if sibling is not None:
            low = self._val_low.get(sibling)
            return low is not None and low[1] < plateau_start < low[2]
        if not self.base_trial.tensor(name).steps(mode=ModeKeys.EVAL):
            return True
        low = self._val_low.get(name)
        return low is not None and low[1] < plateau_start < low[2]

    def _note_validation(self, name: str, step: int, loss: float) -> None:
        low = self._val_low.get(name)
        if low is None or loss < low[0]:
            self._val_low[name] = (loss, step, step)
        elif step > low[2]:
            self._val_low[name] = (low[0], low[1], step)
