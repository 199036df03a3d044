"""``self.req_tensors``: the tensors a rule declares it needs at a step (smdebug's RequiredTensors).

``fetch()`` waits until every declared step is available in its trial and loads the values, so
``invoke_at_step`` then reads from memory. The methods and their return values are smdebug
1.0.34's: ``add``, ``get_names`` (the names in the order added), ``get_tensor_steps`` (the steps
given for a name, as a list in the order given), ``get`` (the ``Tensor`` objects), ``clear``,
``fetch``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from murphy.exceptions import TensorUnavailable


class RequiredTensorsForTrial:
    """What one trial must provide: tensor name → steps, and the Tensor objects."""

    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self._tensor_steps: dict[str, list[int]] = {}
        self._tensors: dict[str, Any] = {}

    def _add_steps(self, name: str, steps: list[int]) -> None:
        self._tensor_steps.setdefault(name, []).extend(steps)
        if name not in self._tensors:
            self._tensors[name] = self.trial.tensor(name)

    def add(self, name: str, steps: Iterable[int], should_match_regex: bool = False) -> None:
        wanted = [int(s) for s in steps]
        if should_match_regex:
            # smdebug: tensor_names(regex=[name]), i.e. re.search; no match adds nothing.
            for n in self.trial.tensor_names(regex=[name]):
                self._add_steps(n, wanted)
            return
        if not self.trial.has_tensor(name):
            raise TensorUnavailable(name)
        self._add_steps(name, wanted)

    def get_tensor_steps(self, name: str) -> list[int]:
        """The steps declared for ``name`` (``KeyError`` if it was not declared, as smdebug)."""
        return self._tensor_steps[name]

    def get_names(self) -> list[str]:
        return list(self._tensor_steps)

    def get(self) -> list[Any]:
        return list(self._tensors.values())

    def clear(self) -> None:
        self._tensor_steps.clear()
        self._tensors.clear()

    def fetch(self) -> None:
        """Wait for every declared step, then load each declared value (smdebug's errors)."""
        required = sorted({s for steps in self._tensor_steps.values() for s in steps})
        if required:
            self.trial.wait_for_steps(required)
        for name, steps in self._tensor_steps.items():
            tensor = self._tensors[name]
            for s in steps:
                tensor.value(s)


class RequiredTensors:
    """Declared ``(trial, tensor name, steps)`` for one step's evaluation, per trial."""

    def __init__(self, base_trial: Any, other_trials: Sequence[Any] | None = ()) -> None:
        self.base_trial = base_trial
        self.other_trials = list(other_trials or ())
        # Keyed by identity: a trial's __eq__ compares (name, path), and two trials of one job
        # opened twice must stay apart.
        self._per_trial: dict[int, RequiredTensorsForTrial] = {}
        for trial in [base_trial, *self.other_trials]:
            self._per_trial.setdefault(id(trial), RequiredTensorsForTrial(trial))

    def _for(self, trial: Any) -> RequiredTensorsForTrial:
        trial = self.base_trial if trial is None else trial
        found = self._per_trial.get(id(trial))
        if found is None:  # smdebug raises KeyError; a trial given here is simply added
            found = self._per_trial[id(trial)] = RequiredTensorsForTrial(trial)
        return found

    def add(self, name: str, steps: Iterable[int], trial: Any = None, should_match_regex: bool = False) -> None:
        """Require ``name`` (a ``re.search`` pattern when ``should_match_regex``) at ``steps``
        of ``trial`` (the base trial by default). An unknown plain name raises
        ``TensorUnavailable`` at once, as in smdebug."""
        self._for(trial).add(name, steps, should_match_regex=should_match_regex)

    def get_tensor_steps(self, name: str, trial: Any = None) -> list[int]:
        """The steps declared for ``name`` in ``trial``."""
        return self._for(trial).get_tensor_steps(name)

    def get_names(self, trial: Any = None) -> list[str]:
        """The declared tensor names of ``trial``, in the order they were added."""
        return self._for(trial).get_names()

    def get(self, trial: Any = None) -> list[Any]:
        """The declared ``Tensor`` objects of ``trial``."""
        return self._for(trial).get()

    def clear(self) -> None:
        for per in self._per_trial.values():
            per.clear()

    def fetch(self) -> None:
        for per in self._per_trial.values():
            per.fetch()


__all__ = ["RequiredTensors", "RequiredTensorsForTrial"]
