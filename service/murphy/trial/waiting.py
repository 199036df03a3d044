"""``Trial.wait_for_steps``: polling until a step is available, with smdebug's errors."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from murphy.core.modes import ModeKeys
from murphy.exceptions import NoMoreData, StepUnavailable
from murphy.tensorio.locations import END_OF_TRAINING_KEY
from murphy.trial.state import StepState

if TYPE_CHECKING:
    from murphy.trial.trial import Trial


class NoMoreDataTimeout(NoMoreData):
    """``wait_for_steps`` gave up: no new data and no end-of-training marker for
    ``no_marker_timeout`` seconds (a run that died without closing its hook)."""

    def __init__(self, step: int, mode: Any, last_step: int | None, timeout: float) -> None:
        super().__init__(step, mode, last_step)
        self.timeout = timeout
        self.args = (
            f"{self.args[0]} (no new data and no {END_OF_TRAINING_KEY} for {timeout:g} s; "
            "the training job probably died)",
        )


def wait_for_step(trial: Trial, step: int, mode: ModeKeys) -> None:
    """Block until global/mode ``step`` is available (see :meth:`Trial.wait_for_steps`)."""
    book, settings = trial._book, trial._settings
    waiting_since = time.monotonic()
    timeout = settings.no_marker_timeout
    first = True
    while True:
        state = book.has_passed_step(step, mode)
        # Like smdebug's ``with refresh(trial)``: waiting refreshes even under no_refresh. The
        # first look is at once; then every poll_interval.
        due = first or time.monotonic() - trial._last_refresh >= settings.poll_interval
        if state is StepState.NOT_YET_AVAILABLE and not book.loaded_all_steps and due:
            trial.refresh()
            state = book.has_passed_step(step, mode)
        first = False
        if state is StepState.AVAILABLE:
            return
        last = book.last_step(mode)
        if state is StepState.UNAVAILABLE:
            if book.loaded_all_steps and step > last:
                raise NoMoreData(step, mode, last)
            raise StepUnavailable(step, mode)
        quiet_for = time.monotonic() - max(waiting_since, trial._last_new_data)
        if timeout is not None and quiet_for >= timeout:
            raise NoMoreDataTimeout(step, mode, last, timeout)
        time.sleep(max(settings.poll_interval, 0.001))
