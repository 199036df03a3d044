"""``self.req_tensors``: the tensors a rule declares it needs at a step (smdebug's RequiredTensors).

``fetch()`` waits until every declared step is available in its trial and loads the values, so
``invoke_at_step`` then reads from memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from murphy.exceptions import TensorUnavailable


class RequiredTensors:
    """Declared ``(trial, tensor name, steps)`` triples for one step's evaluation."""

    def __init__(self, base_trial: Any, other_trials: Sequence[Any] = ()) -> None:
        self.base_trial = base_trial
        self.other_trials = list(other_trials)
        self._wanted: dict[tuple[int, str], set[int]] = {}
        self._trials: dict[int, Any] = {}

    def clear(self) -> None:
        self._wanted.clear()

    def add(
        self,
        name: str,
        steps: Iterable[int],
        trial: Any = None,
        should_match_regex: bool = False,
    ) -> None:
        """Require ``name`` (a regex when ``should_match_regex``) at ``steps`` of ``trial``."""
        trial = self.base_trial if trial is None else trial
        self._trials[id(trial)] = trial
        names = [n for n in trial.tensor_names() if re.search(name, n)] if should_match_regex else [name]
        for n in names:
            self._wanted.setdefault((id(trial), n), set()).update(int(s) for s in steps)

    def get_names(self, trial: Any = None) -> list[str]:
        """The declared tensor names of ``trial`` (the base trial by default)."""
        tid = id(self.base_trial if trial is None else trial)
        return sorted(n for t, n in self._wanted if t == tid)

    def fetch(self) -> None:
        """Wait for every declared step and load its value (raises smdebug's lookup errors)."""
        for (tid, name), steps in self._wanted.items():
            trial = self._trials[tid]
            ordered = sorted(steps)
            trial.wait_for_steps(ordered)
            if not trial.has_tensor(name):
                raise TensorUnavailable(name)
            tensor = trial.tensor(name)
            for s in ordered:
                tensor.value(s)
