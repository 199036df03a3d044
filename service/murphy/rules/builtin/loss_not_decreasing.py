"""LossNotDecreasing: the loss does not go down at an adequate rate."""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from murphy.core.modes import ModeKeys
from murphy.rules.builtin._common import (
    checked_regexes,
    fmt,
    loss_names,
    loss_steps,
    optional_list,
    parse_mode,
    reject_unknown,
    require,
    scalar,
)
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import RuleParameterError, as_bool, as_float, as_int

# Without a ``mode`` parameter the rule watches the first of these modes that has losses.
MODE_ORDER = (ModeKeys.EVAL, ModeKeys.TRAIN, ModeKeys.GLOBAL)
# A rise between checks fires on one save alone only beyond this many standard deviations of
# the difference of two saves; the noise is estimated from at least MIN_DIFFS successive
# differences (fewer: taken as noiseless).
NOISE_SD = 3.0
MIN_DIFFS = 4


@dataclass
class _Window:
    """Per (mode, loss tensor): where the current window started."""

    last_check: int
    checked: bool = False


class LossNotDecreasing(EveryWorker):
    """Fires when a loss did not decrease by ``diff_percent`` % over ``num_steps`` steps.

    Steps are mode steps of the watched mode (``mode``, else the first of EVAL, TRAIN, GLOBAL
    with saved losses). Losses are the ``losses`` collection (``use_losses_collection``) plus
    ``collection_names``/``tensor_regex``; each must be a scalar. Per loss tensor:

    * The first saved step the rule sees opens the first window (``last_check``).
    * A saved step ``s >= last_check + num_steps`` is a check: ``base`` is the loss at the
      newest saved step ``<= s - num_steps``; it fires if
      ``loss(s) > base - |base| * diff_percent / 100``; ``s`` becomes ``last_check``.
    * ``increase_threshold_percent`` caps a rise between checks, over the same distance: once
      a check has passed, a saved step ``s`` that is not a check fires at once if
      ``loss(s) > base(s) + |base(s)| * increase_threshold_percent / 100``, with ``base(s)``
      the loss at the newest saved step ``<= s - num_steps`` (skipped when there is none).
      Both conditions compare losses ``num_steps`` apart: against the loss at the last check
      (as few as 1 step back) a rise between checks was one noisy minibatch or evaluation, and
      it fired on 7 of 33 healthy runs of ``benchmarks/rule_quality``. Before the first check
      the rule has no evidence the loss ever went down, so early fluctuations do not count.
    * A rise of one save that is within the loss's own save-to-save noise must be confirmed by
      the level of the loss: it fires only if the mean of the saves in ``(s - num_steps, s]``
      also exceeds the mean of those in ``(base - num_steps, base]`` by
      ``increase_threshold_percent``. The noise ``sd`` of one save is estimated, robustly to
      the trend, from the successive differences ``d`` of the saves in ``(s - 2 * num_steps,
      s)``: ``sd = 1.4826 * median(|d - median(d)|) / sqrt(2)``, taken as 0 with fewer than 4
      differences; "within noise" is ``loss(s) - limit <= 3 * sqrt(2) * sd``. A smooth loss
      (``sd = 0``) or a sparse one (fewer than 5 saves in ``2 * num_steps`` steps, as with
      AWS's default ``save_interval`` of 500) is judged on single saves as above. A
      per-minibatch loss saved every step scatters +-20-35 %, and comparing two single batches
      against a 5 % cap fired within a few steps of the first check on healthy runs whose loss
      fell 20-fold in 30 steps (``benchmarks/rule_quality``, the seed's twin). The check
      itself compares single saves, as documented (and as the reference data point needs).

    With saves every 3 steps and ``num_steps=10``, a check at 21 compares with 9 and the next
    check is at 33, as in AWS's documentation.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str = "",
        *,
        other_trials: Sequence[Any] | None = None,
        collection_names: Any = None,
        tensor_regex: Any = None,
        use_losses_collection: Any = True,
        num_steps: Any = "10",
        diff_percent: Any = "0.1",
        increase_threshold_percent: Any = "5",
        mode: Any = None,
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        n = self.rule_name
        reject_unknown(n, extra, ("collection_names", "tensor_regex", "use_losses_collection",
                                  "num_steps", "diff_percent", "increase_threshold_percent", "mode"))
        self.collection_names = optional_list(collection_names, "collection_names", n)
        self.tensor_regex = checked_regexes(tensor_regex, "tensor_regex", n)
        self.use_losses_collection = as_bool(use_losses_collection, "use_losses_collection", n)
        self.num_steps = as_int(num_steps, "num_steps", n)
        require(self.num_steps > 0, n, "num_steps", num_steps, "> 0")
        self.diff_percent = as_float(diff_percent, "diff_percent", n)
        require(0 <= self.diff_percent <= 100, n, "diff_percent", diff_percent, "in [0, 100]")
        self.increase_threshold_percent = as_float(increase_threshold_percent, "increase_threshold_percent", n)
        require(self.increase_threshold_percent >= 0, n, "increase_threshold_percent",
                increase_threshold_percent, ">= 0")
        self.mode = parse_mode(mode, "mode", n)
        if not (self.use_losses_collection or self.collection_names or self.tensor_regex):
            raise RuleParameterError(
                f"{n}: no loss tensors selected: use_losses_collection is false and neither "
                "collection_names nor tensor_regex is given"
            )
        self._windows: dict[tuple[ModeKeys, str], _Window] = {}

    def _watched_mode(self, names: list[str]) -> ModeKeys:
        if self.mode is not None:
            return self.mode
        for mode in MODE_ORDER:
            if any(loss_steps(self.base_trial, n, mode) for n in names):
                return mode
        return ModeKeys.GLOBAL

    def invoke_worker_step(self, step: int) -> bool:
        trial = self.base_trial
        names = loss_names(trial, self.collection_names, self.tensor_regex, self.use_losses_collection)
        mode = self._watched_mode(names)
        if mode is ModeKeys.GLOBAL:
            mode_step: int | None = step
        else:
            step_mode, mode_step = trial.mode_modestep(step)
            if step_mode is not mode:
                return False
        assert mode_step is not None
        return any(self._check(name, mode, mode_step, step) for name in names)

    def _check(self, name: str, mode: ModeKeys, s: int, step: int) -> bool:
        saved = loss_steps(self.base_trial, name, mode)
        if s not in saved:
            return False
        tensor = self.base_trial.tensor(name)
        loss = scalar(tensor.value(s, mode=mode))
        window = self._windows.setdefault((mode, name), _Window(s))
        i = bisect.bisect_right(saved, s - self.num_steps) - 1
        if s < window.last_check + self.num_steps:
            if not window.checked or s <= window.last_check or i < 0:
                return False
            base_step = saved[i]
            base = scalar(tensor.value(base_step, mode=mode))
            limit = base + abs(base) * self.increase_threshold_percent / 100
            if loss <= limit:
                return False
            what = f"rose more than {fmt(self.increase_threshold_percent)} %"
            if loss - limit > NOISE_SD * math.sqrt(2) * self._noise(tensor, mode, saved, s):
                return self._fire(step, name, mode, s, loss, base_step, base, what, limit)
            level, level_base = self._level(tensor, mode, saved, s), self._level(tensor, mode, saved, base_step)
            if level > level_base + abs(level_base) * self.increase_threshold_percent / 100:
                what += (f" (beyond batch noise: mean {fmt(level)} over the saves of the last "
                         f"{self.num_steps} steps vs {fmt(level_base)} before step {base_step})")
                return self._fire(step, name, mode, s, loss, base_step, base, what, limit)
            return False
        base_step = saved[max(i, 0)]
        base = scalar(tensor.value(base_step, mode=mode))
        window.last_check, window.checked = s, True
        limit = base - abs(base) * self.diff_percent / 100
        if loss > limit:
            return self._fire(step, name, mode, s, loss, base_step, base,
                              f"did not decrease by {fmt(self.diff_percent)} %", limit)
        return False

    def _noise(self, tensor: Any, mode: ModeKeys, saved: list[int], s: int) -> float:
        """A robust standard deviation of one save's noise, from the saves in (s - 2n, s)."""
        lo, hi = bisect.bisect_right(saved, s - 2 * self.num_steps), bisect.bisect_left(saved, s)
        values = [scalar(tensor.value(t, mode=mode)) for t in saved[lo:hi]]
        diffs = [b - a for a, b in itertools.pairwise(values)]
        if len(diffs) < MIN_DIFFS:
            return 0.0
        mid = statistics.median(diffs)
        return 1.4826 * statistics.median(abs(d - mid) for d in diffs) / math.sqrt(2)

    def _level(self, tensor: Any, mode: ModeKeys, saved: list[int], end: int) -> float:
        """The mean loss of the saves in (end - num_steps, end]."""
        lo, hi = bisect.bisect_right(saved, end - self.num_steps), bisect.bisect_right(saved, end)
        return statistics.fmean(scalar(tensor.value(t, mode=mode)) for t in saved[lo:hi])

    def _fire(self, step: int, name: str, mode: ModeKeys, s: int, loss: float,
              ref_step: int, ref: float, what: str, limit: float) -> bool:
        where = f"step {s}" if mode is ModeKeys.GLOBAL else f"{mode.name} step {s} (global {step})"
        message = (
            f"{self.rule_name}: loss {name} {what}: {fmt(loss)} at {where} vs {fmt(ref)} at "
            f"{'' if mode is ModeKeys.GLOBAL else mode.name + ' '}step {ref_step} "
            f"(threshold: <= {fmt(limit)})"
        )
        return self.found(step, message, tensor=name, value=loss)
