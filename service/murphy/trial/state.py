"""Step bookkeeping for a trial: global ↔ (mode, mode step), workers per step, completeness.

A step is *complete* once ``num_workers`` workers wrote it, once a later step is complete
(``last_complete_step``), or once training has ended. Sorted step lists are cached per
``(mode, show_incomplete)`` and dropped whenever :attr:`StepBook.version` changes, so
``steps()`` is a list copy, not a sort, between refreshes.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from enum import Enum

from murphy.core.modes import ModeKeys


class StepState(Enum):
    """Answer of :meth:`murphy.trial.Trial.has_passed_step` (smdebug's values)."""

    UNAVAILABLE = 0
    AVAILABLE = 1
    NOT_YET_AVAILABLE = 2


class StepBook:
    """Every step a trial has seen, and which of them are complete."""

    def __init__(self, num_workers: int = 1) -> None:
        self.num_workers = num_workers
        self.global_to_mode: dict[int, tuple[ModeKeys, int]] = {}
        self.mode_to_global: dict[ModeKeys, dict[int, int]] = {}
        self.workers_for_step: dict[int, set[str]] = {}
        self.last_complete_step = -1
        self.loaded_all_steps = False
        # Bumped on every change that can alter a steps()/completeness answer; caches key on it.
        self.version = 0
        self._cache: dict[tuple[ModeKeys, bool], list[int]] = {}
        self._cache_version = -1

    def _changed(self) -> None:
        self.version += 1

    def add(self, step: int, worker: str, mode: ModeKeys, mode_step: int) -> None:
        """Record that ``worker`` wrote global ``step`` (the first writer's mode wins, as smdebug)."""
        if step not in self.global_to_mode:
            self.global_to_mode[step] = (mode, mode_step)
            if mode is not ModeKeys.GLOBAL:
                self.mode_to_global.setdefault(mode, {}).setdefault(mode_step, step)
            self._changed()
        workers = self.workers_for_step.setdefault(step, set())
        if worker not in workers:
            workers.add(worker)
            self._changed()
            if len(workers) >= self.num_workers and step > self.last_complete_step:
                self.last_complete_step = step

    def mark_ended(self) -> None:
        """Training has ended: every step seen is complete."""
        self.loaded_all_steps = True
        if self.global_to_mode:
            self.last_complete_step = max(self.last_complete_step, max(self.global_to_mode))
        self._changed()

    def apply_window(self, window: int) -> bool:
        """Give up on the oldest incomplete steps when more than ``window`` are waiting.

        smdebug's ``SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW``: a worker that stopped writing must not
        keep every later step incomplete (and re-listed) forever. Half the window is marked
        complete at once. Returns True if ``last_complete_step`` moved.
        """
        if self.loaded_all_steps:
            return False
        all_steps = self.all_steps(ModeKeys.GLOBAL)
        moved = False
        while True:
            first_incomplete = bisect_right(all_steps, self.last_complete_step)
            if len(all_steps) - first_incomplete <= window:
                break
            # Unlike smdebug (half a window per refresh) this repeats until the backlog fits,
            # so a trial opened on a finished-but-unmarked job does not need many refreshes.
            self.last_complete_step = all_steps[first_incomplete + max(1, window // 2) - 1]
            moved = True
        if moved:
            self._changed()
        return moved

    def is_complete(self, step: int) -> bool:
        """True if global ``step`` counts as complete (see the module docstring)."""
        return (
            self.loaded_all_steps
            or step <= self.last_complete_step
            or len(self.workers_for_step.get(step, ())) >= self.num_workers
        )

    def global_step(self, mode: ModeKeys, mode_step: int) -> int | None:
        """The global step of ``(mode, mode_step)``, or None if not seen."""
        if mode is ModeKeys.GLOBAL:
            return mode_step
        return self.mode_to_global.get(mode, {}).get(mode_step)

    def _cached(self, key: tuple[ModeKeys, bool]) -> list[int] | None:
        if self._cache_version != self.version:
            self._cache.clear()
            self._cache_version = self.version
        return self._cache.get(key)

    def all_steps(self, mode: ModeKeys) -> list[int]:
        """Every step seen (mode steps for a mode), sorted. The cached list: do not mutate."""
        key = (mode, True)
        cached = self._cached(key)
        if cached is None:
            if mode is ModeKeys.GLOBAL:
                cached = sorted(self.global_to_mode)
            else:
                cached = sorted(self.mode_to_global.get(mode, ()))
            self._cache[key] = cached
        return cached

    def steps(self, mode: ModeKeys, show_incomplete_steps: bool = False) -> list[int]:
        """Complete steps (or all with ``show_incomplete_steps``), sorted. Cached: do not mutate."""
        if show_incomplete_steps or self.loaded_all_steps:
            return self.all_steps(mode)
        key = (mode, False)
        cached = self._cached(key)
        if cached is None:
            if mode is ModeKeys.GLOBAL:
                cached = [s for s in self.all_steps(mode) if self.is_complete(s)]
            else:
                to_global = self.mode_to_global.get(mode, {})
                cached = [s for s in self.all_steps(mode) if self.is_complete(to_global[s])]
            self._cache[key] = cached
        return cached

    def has_passed_step(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> StepState:
        """smdebug's three-way answer; the "skipped" test uses global steps for every mode."""
        all_steps = self.all_steps(mode)
        i = bisect_left(all_steps, step)
        if i < len(all_steps):
            if all_steps[i] == step:
                g = self.global_step(mode, step)
                if g is not None and self.is_complete(g):
                    return StepState.AVAILABLE
                return StepState.NOT_YET_AVAILABLE
            # A later step exists. Workers write steps in order, so once a later step is complete
            # every worker has passed this one without saving it.
            if mode is ModeKeys.GLOBAL:
                skipped = self.last_complete_step > step
            else:
                g_next = self.global_step(mode, all_steps[i])
                skipped = g_next is not None and self.last_complete_step >= g_next
            if skipped or self.loaded_all_steps:
                return StepState.UNAVAILABLE
            return StepState.NOT_YET_AVAILABLE
        if self.loaded_all_steps:
            return StepState.UNAVAILABLE
        return StepState.NOT_YET_AVAILABLE

    def last_step(self, mode: ModeKeys) -> int:
        """The highest step seen in ``mode`` (-1 if none), for ``NoMoreData``."""
        steps = self.all_steps(mode)
        return steps[-1] if steps else -1
