"""``WorkerView``: one worker's series of a multi-worker trial, read through the trial's API.

A multi-instance job (issue 17) writes one series per rank, ``worker_0`` .. ``worker_<n-1>``,
into one trial. A rule written for one series (a loss curve, a weight's successive values, a
running label count) must not mix them: two healthy workers' losses interleaved are not one
curve, and a fault on one rank must be found on that rank. The view answers the trial's reader
methods as if ``worker`` were the only worker: ``steps()`` are the (complete) steps it wrote,
``tensor(name).steps()`` the steps where *it* saved ``name``, ``value()`` its value, and
``tensor_names(step=...)`` / ``write_order`` / ``inputs`` / ``labels`` / ``predictions`` what it
saved at the step. Everything else (modes, collections, completeness, the end of training) is
the trial's own answer: a step is complete when every worker that writes it has written it,
whichever worker's view asks.

It lives beside :class:`~murphy.trial.trial.Trial` because it reads what only the trial's
per-worker accessors expose (``files_at``, ``worker_steps``, ``state_version``: as last
refreshed, without a request).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

import numpy as np

from murphy.core.collection import Collection
from murphy.core.modes import ModeKeys, as_mode
from murphy.exceptions import TensorUnavailableForStep
from murphy.trial import stepvalues
from murphy.trial.tensor import Tensor
from murphy.trial.trial import Trial

Array = np.ndarray[Any, Any]


def step_workers(trial: Trial, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[str]:
    """The workers that wrote ``step`` (a mode step with ``mode``) so far, sorted."""
    return sorted(trial.files_at(step, as_mode(mode)))


class WorkerTensor:
    """One tensor as ``worker`` saved it: its steps and values only. Methods not listed here
    are the underlying :class:`Tensor`'s."""

    def __init__(self, tensor: Tensor, view: WorkerView) -> None:
        self._tensor = tensor
        self._view = view
        self.name = tensor.name
        self._cache: dict[tuple[ModeKeys, bool], tuple[tuple[int, int], list[int]]] = {}

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._tensor, attr)

    def __repr__(self) -> str:
        return f"<murphy Tensor {self.name!r} of {self._view.worker} of trial {self._view.name!r}>"

    def _saved(self, step: int, mode: ModeKeys) -> bool:
        mine = self._view.trial.files_at(step, mode).get(self._view.worker)
        return mine is not None and self.name in mine[1].slots

    def steps(self, mode: ModeKeys = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Steps at which the worker saved this tensor, sorted (complete ones unless asked)."""
        mode = as_mode(mode)
        every = self._tensor.steps(mode=mode, show_incomplete_steps=show_incomplete_steps)  # refreshes
        trial = self._view.trial
        version = trial.state_version
        cached = self._cache.get((mode, show_incomplete_steps))
        if cached is not None and cached[0] == version:
            return list(cached[1])
        mine = [s for s in every if self._saved(s, mode)]
        self._cache[(mode, show_incomplete_steps)] = (version, mine)
        return list(mine)

    def prev_steps(self, step: int, n: int | None = None, mode: ModeKeys = ModeKeys.GLOBAL) -> list[int]:
        """Up to ``n`` of the worker's saved steps <= ``step`` (all when ``n`` is None), oldest first."""
        steps = self.steps(mode=as_mode(mode))
        prev = steps[: bisect.bisect_right(steps, step)]
        return prev[-n:] if n else prev

    def workers(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[str]:
        """``[worker]`` if it saved this tensor at the step; ``TensorUnavailableForStep`` if not."""
        self._require(step_num, as_mode(mode))
        return [self._view.worker]

    def _require(self, step: int, mode: ModeKeys) -> None:
        # The underlying tensor raises smdebug's error for a step nobody saved it at; a step
        # only other workers saved it at is, for this worker, a step without the tensor.
        if self._view.worker not in self._tensor.workers(step, mode=mode):
            raise TensorUnavailableForStep(self.name, step, mode)

    def _worker(self, worker: str | None) -> str:
        return self._view.worker if worker is None else worker

    def value(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None) -> Array:
        mode = as_mode(mode)
        self._require(step_num, mode)
        return self._tensor.value(step_num, mode=mode, worker=self._worker(worker))

    def values(self, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None) -> dict[int, Array]:
        return {s: self.value(s, mode=mode, worker=worker) for s in self.steps(mode=mode)}

    def shape(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None) -> tuple[int, ...]:
        mode = as_mode(mode)
        self._require(step_num, mode)
        return self._tensor.shape(step_num, mode=mode, worker=self._worker(worker))

    def reduction_value(self, step_num: int, reduction_name: str, mode: ModeKeys = ModeKeys.GLOBAL,
                        worker: str | None = None, abs: bool = False) -> Array:
        mode = as_mode(mode)
        self._require(step_num, mode)
        return self._tensor.reduction_value(step_num, reduction_name, mode=mode, worker=self._worker(worker), abs=abs)

    def reduction_values(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL,
                         worker: str | None = None) -> dict[tuple[str, bool], Array]:
        mode = as_mode(mode)
        self._require(step_num, mode)
        return self._tensor.reduction_values(step_num, mode=mode, worker=self._worker(worker))


class WorkerView(stepvalues.StepQueries):
    """``trial`` as ``worker`` wrote it (see the module docstring). Attributes not listed here
    (modes, collections, ``loaded_all_steps``, ``has_passed_step`` ...) are the trial's."""

    def __init__(self, trial: Trial, worker: str) -> None:
        self.trial = trial
        self.worker = worker
        self.name = trial.name
        self._tensors: dict[str, WorkerTensor] = {}
        # steps() by (mode, show_incomplete_steps), valid while the trial's versions are unchanged
        self._steps: dict[tuple[ModeKeys, bool], tuple[tuple[int, int], list[int]]] = {}

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.trial, attr)

    def __repr__(self) -> str:
        return f"<murphy WorkerView {self.worker} of {self.trial!r}>"

    def workers(self) -> list[str]:
        return [self.worker]

    def collections(self) -> dict[str, Collection]:
        """The trial's (one set for every worker); spelled out so the view is a typed StepReader."""
        return self.trial.collections()

    def wrote(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> bool:
        """True if the worker wrote ``step`` (any tensor)."""
        return self.worker in step_workers(self.trial, step, mode)

    def steps(self, mode: ModeKeys = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """The steps the worker wrote (complete ones unless asked), sorted."""
        mode = as_mode(mode)
        trial = self.trial
        trial.maybe_refresh()
        version = trial.state_version
        key = (mode, show_incomplete_steps)
        cached = self._steps.get(key)
        if cached is None or cached[0] != version:
            # A rule asks at every step or poll tick (StalledTrainingRule): computed again only
            # when the trial's state changed, in one pass (Trial.worker_steps).
            cached = self._steps[key] = (version, trial.worker_steps(self.worker, mode, show_incomplete_steps))
        return list(cached[1])

    def tensor(self, tname: str) -> WorkerTensor:
        view = self._tensors.get(tname)
        if view is None:
            view = self._tensors[tname] = WorkerTensor(self.trial.tensor(tname), self)
        return view

    def _saved_names(self, step: int, mode: ModeKeys) -> list[str]:
        """The worker's names at ``step`` in write order (its one index file's order)."""
        mine = self.trial.files_at(step, mode).get(self.worker)
        return list(mine[1].slots) if mine is not None else []

    def tensor_names(self, show_prefixed_tensors: bool = False, *, step: int | None = None,
                     mode: ModeKeys = ModeKeys.GLOBAL, regex: str | Iterable[str] | None = None,
                     collection: Any = None) -> list[str]:
        """The trial's names; at ``step``, only those the worker saved there."""
        names = self.trial.tensor_names(show_prefixed_tensors, step=step, mode=mode, regex=regex,
                                        collection=collection)
        if step is None:
            return names
        mine = set(self._saved_names(step, as_mode(mode)))
        return [n for n in names if n in mine]

    def write_order(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[str]:
        """Names the worker saved at ``step``, in the order it wrote them."""
        self.trial.maybe_refresh()
        return self._saved_names(step, as_mode(mode))
