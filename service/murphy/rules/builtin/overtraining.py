"""Overtraining: the training or validation loss stopped improving."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from murphy.core.modes import ModeKeys
from murphy.rules.builtin._common import fmt, loss_names, reject_unknown, require, scalar
from murphy.rules.params import as_float, as_int
from murphy.rules.rule import Rule


@dataclass
class _Best:
    loss: float
    last: int  # the last step counted, so that a step evaluated twice counts once
    stale: int = 0


@dataclass
class _Recent:
    """The latest raw training losses (the running-mean window) and the last step added."""

    values: deque[float]
    last: int = -1


class Overtraining(Rule):
    """Fires when a loss has not improved by more than ``delta`` for a number of saved steps:
    ``patience_train`` TRAIN saves (GLOBAL saves count as training) or ``patience_validation``
    EVAL saves.

    Per (mode, loss tensor of the ``losses`` collection) the rule keeps the best loss; a save
    with ``loss < best - delta`` (``delta`` is absolute) is an improvement and resets the count,
    any other save adds one. It fires when the count reaches the patience. Steps are processed
    in order; a step seen before is not counted again.

    The *training* loss judged at a save is the running mean of the last ``patience_train``
    raw saves (fewer at the start); the validation loss is judged raw. A training loss is one
    minibatch's loss, and its noise (+-20 % at batch 128) swamps ``delta`` as soon as saves are
    close together: against the single luckiest batch seen so far, healthy runs that were
    still improving fired within 5-60 steps in ``benchmarks/rule_quality``. A validation loss
    is usually a whole evaluation's mean already. On a loss that is truly flat the mean is flat
    too, so detection is as quick as on raw values; on a curve that flattens gradually it
    comes up to ``patience_train - 1`` saves later.
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

    def _running_mean(self, name: str, step: int, loss: float) -> float:
        recent = self._recent.setdefault(name, _Recent(deque(maxlen=self.patience_train)))
        if step > recent.last:
            recent.values.append(loss)
            recent.last = step
        return sum(recent.values) / len(recent.values)

    def invoke_at_step(self, step: int) -> bool:
        trial = self.base_trial
        mode = trial.mode(step) or ModeKeys.GLOBAL
        if mode is ModeKeys.PREDICT:
            return False
        is_eval = mode is ModeKeys.EVAL
        patience = self.patience_validation if is_eval else self.patience_train
        for name in loss_names(trial, None, None):
            if step not in trial.tensor(name).steps():
                continue
            loss = scalar(trial.tensor(name).value(step))
            if not is_eval:
                loss = self._running_mean(name, step, loss)
            best = self._best.get((mode, name))
            if best is None or loss < best.loss - self.delta:
                self._best[(mode, name)] = _Best(loss, step)
                continue
            if step <= best.last:
                continue
            best.last, best.stale = step, best.stale + 1
            if best.stale >= patience:
                kind = "validation" if is_eval else "training"
                message = (
                    f"{self.rule_name}: {kind} loss {name} has not improved by more than "
                    f"{fmt(self.delta)} for {best.stale} saved steps (patience {patience}) at step "
                    f"{step}: {fmt(loss)} vs best {fmt(best.loss)}"
                )
                return self.found(step, message, tensor=name, value=loss)
        return False
