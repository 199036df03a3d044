"""StalledTrainingRule: the training job wrote no new tensor for ``threshold`` seconds."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from murphy.exceptions import MurphyError
from murphy.rules.builtin._common import fmt, reject_unknown, require
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import as_bool, as_float
from murphy.tensorio.locations import index_file_key
from murphy.tensorio.reader import read_index, read_tensor_record

_ACCEPTED = ("threshold", "stop_training_on_fire", "training_job_name_prefix")


def step_wall_time(trial: Any, step: int) -> float | None:
    """The ``wall_time`` of the first record a worker wrote at global ``step`` (the training
    host's clock when the hook saved it), or None when it cannot be read.

    Costs two small reads (the step's index file, one ranged record).
    """
    for worker in trial.workers():
        try:
            index = read_index(trial.store, index_file_key(step, worker))
            if not index.tensors:
                continue
            entry = index.tensors[0]
            event = read_tensor_record(trial.store, index.event_file_name, entry.start_idx, entry.length)
        except (MurphyError, OSError, KeyError):
            continue
        return float(event.wall_time) if event.wall_time > 0 else None
    return None


class StalledTrainingRule(EveryWorker):
    """Fires when no new tensor was written for more than ``threshold`` seconds.

    A stall is the absence of steps, so per-step evaluation alone cannot see it while it
    happens. The rule therefore works in two ways:

    - **Between steps** (``invoke_at_step``, any engine): the gap between consecutive
      evaluated steps. The time of a step is the ``wall_time`` of its first record (the clock of
      the training host, written by the hook into the events file); when that cannot be read,
      the time the rule first saw the step. It fires at step ``s`` when
      ``time(s) - time(previous step) > threshold``: the run was stalled before ``s`` arrived
      (this also finds stalls in a finished run evaluated afterwards).
    - **While waiting** (:meth:`check_stalled`, called by murphy's engine on each poll tick
      when no new step is available): it refreshes the trial's step list (incomplete steps
      count as progress) and fires when ``now - time(newest data) > threshold``. The newest
      data's time is the ``wall_time`` of the newest evaluated step, or the rule's clock when
      newer (incomplete, not yet evaluated) data appeared, or, before any step, when the rule
      started. After the end-of-training marker it never fires. It reports a stall once; new
      data re-arms it.

    Comparing the rule host's ``now`` with the training host's ``wall_time`` assumes clocks in
    sync to well under ``threshold`` (NTP; the default is 30 minutes).

    ``stop_training_on_fire`` and ``training_job_name_prefix`` are accepted and kept as
    attributes; stopping a job is the control plane's action (by exact job name). ``clock``
    (seconds since the epoch, default ``time.time``) is for tests, not a RuleParameter.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str | Sequence[Any] | None = "",
        other_trials: Sequence[Any] | None = None,
        *,
        threshold: Any = "1800",
        stop_training_on_fire: Any = "False",
        training_job_name_prefix: Any = None,
        clock: Callable[[], float] = time.time,
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        name = self.rule_name
        reject_unknown(name, extra, _ACCEPTED)
        if not callable(clock):  # a "clock" RuleParameter string: not a parameter of the rule
            reject_unknown(name, {"clock": clock}, _ACCEPTED)
        self.threshold = as_float(threshold, "threshold", name)
        require(self.threshold > 0, name, "threshold", threshold, "a number of seconds > 0")
        self.stop_training_on_fire = as_bool(stop_training_on_fire, "stop_training_on_fire", name)
        self.training_job_name_prefix = None if training_job_name_prefix is None else str(training_job_name_prefix)
        self.clock = clock
        self.last_progress = clock()
        self.last_step: int | None = None
        self._last_step_time: float | None = None
        self._newest_seen = -1
        self._reported = False

    def _progress(self, when: float) -> None:
        self.last_progress = when
        self._reported = False

    def invoke_worker_step(self, step: int) -> bool:
        if self.last_step is not None and step <= self.last_step:
            return False
        now = self.clock()
        wall = step_wall_time(self.base_trial, step)
        when = now if wall is None else wall
        previous, prev_time = self.last_step, self._last_step_time
        self.last_step, self._last_step_time = step, when
        self._newest_seen = max(self._newest_seen, step)
        self._progress(when)
        if previous is None or prev_time is None:
            return False
        gap = when - prev_time
        if gap > self.threshold:
            return self.found(
                step,
                f"no new tensor for {fmt(gap)} s between step {previous} and step {step} "
                f"(> threshold {fmt(self.threshold)} s): training was stalled",
                value=gap,
            )
        return False

    def check_stalled(self, now: float | None = None) -> bool:
        """Call on each poll tick while no new step is available; True (once per stall, with
        :attr:`finding` set) when nothing new was written for more than ``threshold`` seconds.

        With several workers each is watched on its own (its own steps, incomplete ones
        included): one rank that hangs while the others still write is a stall."""
        now = self.clock() if now is None else now
        copies = self.worker_copies()
        if not copies:
            return self._check_stalled_one(now)
        fired = None
        for worker, rule in copies:
            assert isinstance(rule, StalledTrainingRule)  # a copy is built as type(self)
            if rule._check_stalled_one(now) and fired is None:
                fired = self._labelled(rule.finding, rule.last_step or 0, worker)
        if fired is None:
            return False
        self.finding = fired
        return True

    def _check_stalled_one(self, now: float) -> bool:
        trial = self.base_trial
        steps = trial.steps(show_incomplete_steps=True)
        if trial.loaded_all_steps:
            return False
        if steps and steps[-1] > self._newest_seen:
            self._newest_seen = steps[-1]
            self._progress(now)
            return False
        idle = now - self.last_progress
        if idle <= self.threshold or self._reported:
            return False
        self._reported = True
        after = "before any step" if self.last_step is None else f"after step {self.last_step}"
        self.found(
            self.last_step if self.last_step is not None else 0,
            f"no new tensor for {fmt(idle)} s {after} (> threshold {fmt(self.threshold)} s): "
            "training is stalled",
            value=idle,
        )
        return True
