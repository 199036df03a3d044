"""``Tensor``: one tensor name across steps and workers, with smdebug's reader methods.

Reductions saved as ``smdebug/reductions/[abs_]<op>/<name>`` are folded into the base tensor:
``reduction_value`` returns the stored value, else computes it from the raw value with numpy
(``variance`` is ``np.var``, i.e. ddof=0, while the PyTorch hook stores torch's unbiased
``var``: a stored and a computed variance of the same tensor differ by n/(n-1), as in smdebug).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from murphy.core.modes import ModeKeys
from murphy.exceptions import (
    InvalidWorker,
    NoMoreData,
    ShapeUnavailableForStep,
    SMDebugError,
    SMDebugNotImplementedError,
    SMDebugValueError,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
)
from murphy.trial.fetch import Location
from murphy.trial.state import StepState

if TYPE_CHECKING:
    from murphy.trial.trial import Trial

_NUMPY_REDUCTIONS: dict[str, Callable[[np.ndarray[Any, Any]], Any]] = {
    "min": np.amin,
    "max": np.amax,
    "mean": np.mean,
    "std": np.std,
    "variance": np.var,
    "sum": np.sum,
    "prod": np.prod,
    "l1": lambda a: np.linalg.norm(a.ravel(), ord=1),
    "l2": lambda a: np.linalg.norm(a.ravel(), ord=2),
}


def numpy_reduction(name: str, value: np.ndarray[Any, Any], abs_: bool = False) -> np.ndarray[Any, Any]:
    """Reduce ``value`` the way smdebug's reader does (``l1``/``l1_norm`` are both accepted)."""
    op = name[: -len("_norm")] if name.endswith("_norm") else name
    fn = _NUMPY_REDUCTIONS.get(op)
    if fn is None:
        raise SMDebugValueError(f"unknown reduction {name!r}; allowed: {', '.join(_NUMPY_REDUCTIONS)}")
    data = np.absolute(value) if abs_ else value
    return np.asarray(fn(data))


class StepRecord:
    """What one worker saved of one tensor at one step: where its raw value and reductions are."""

    __slots__ = ("location", "reductions", "shape", "value")

    def __init__(self) -> None:
        self.location: Location | None = None
        self.reductions: dict[tuple[str, bool], Location] | None = None
        self.shape: tuple[int, ...] | None = None
        self.value: np.ndarray[Any, Any] | None = None  # only with cache=True


class Tensor:
    """A saved tensor. Steps are global unless a ``mode`` is given (then they are mode steps)."""

    def __init__(self, name: str, trial: Trial, cache: bool = False) -> None:
        self.name = name
        self.original_name: str | None = None
        self.trial = trial
        self.cache = cache
        self._steps: dict[int, dict[str, StepRecord]] = {}
        self._version = 0
        self._sorted: list[int] = []
        self._sorted_version = -1

    def __repr__(self) -> str:
        return f"<murphy Tensor {self.name!r} of trial {self.trial.name!r}>"

    # --- filled by the trial while it reads index files ---------------------------------------

    def _record(self, step: int, worker: str) -> StepRecord:
        by_worker = self._steps.get(step)
        if by_worker is None:
            by_worker = self._steps[step] = {}
            self._version += 1
        rec = by_worker.get(worker)
        if rec is None:
            rec = by_worker[worker] = StepRecord()
        return rec

    def add_location(self, step: int, worker: str, loc: Location) -> None:
        self._record(step, worker).location = loc

    def add_reduction(self, step: int, worker: str, op: str, abs_: bool, loc: Location) -> None:
        rec = self._record(step, worker)
        if rec.reductions is None:
            rec.reductions = {}
        rec.reductions[(op, abs_)] = loc

    def add_shape(self, step: int, worker: str, shape: tuple[int, ...], original_name: str | None) -> None:
        self._record(step, worker).shape = shape
        if original_name:
            self.original_name = original_name

    # --- steps --------------------------------------------------------------------------------

    def _global_steps(self) -> list[int]:
        if self._sorted_version != self._version:
            self._sorted = sorted(self._steps)
            self._sorted_version = self._version
        return self._sorted

    def steps(self, mode: ModeKeys = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Steps at which this tensor (or a reduction of it) was saved, sorted."""
        self.trial.maybe_refresh(self.name)
        book = self.trial._book
        gs = self._global_steps()
        if not show_incomplete_steps and not book.loaded_all_steps:
            gs = [g for g in gs if book.is_complete(g)]
        if mode is ModeKeys.GLOBAL:
            return list(gs)
        to_mode = book.global_to_mode
        return [ms for m, ms in (to_mode[g] for g in gs) if m is mode]

    def prev_steps(self, step: int, n: int | None = None, mode: ModeKeys = ModeKeys.GLOBAL) -> list[int]:
        """Up to ``n`` saved steps ≤ ``step`` (all of them when ``n`` is None), oldest first."""
        steps = self.steps(mode=mode)
        prev = steps[: bisect.bisect_right(steps, step)]
        return prev[-n:] if n else prev

    def workers(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[str]:
        """Workers that saved this tensor at the step, sorted."""
        by_worker = self._by_worker(step_num, mode)
        if by_worker is None:
            self.trial.maybe_refresh(self.name)
            by_worker = self._by_worker(step_num, mode)
        if by_worker is None:
            raise TensorUnavailableForStep(self.name, step_num, mode)
        return sorted(by_worker)

    def _by_worker(self, step_num: int, mode: ModeKeys) -> dict[str, StepRecord] | None:
        g = self.trial._book.global_step(mode, step_num)
        return None if g is None else self._steps.get(g)

    def _step(self, step_num: int, mode: ModeKeys, worker: str | None) -> StepRecord:
        """The record for the step, or smdebug's lookup error for why there is none."""
        by_worker = self._by_worker(step_num, mode)
        if by_worker is None:
            self.trial.maybe_refresh(self.name)
            by_worker = self._by_worker(step_num, mode)
        if by_worker is None:
            raise self._missing_error(step_num, mode)
        if worker is None:
            return by_worker[min(by_worker)]
        rec = by_worker.get(worker)
        if rec is None:
            raise InvalidWorker(worker)
        return rec

    def _missing_error(self, step_num: int, mode: ModeKeys) -> SMDebugError:
        trial = self.trial
        state = trial.has_passed_step(step_num, mode)
        if state is StepState.AVAILABLE:
            return TensorUnavailableForStep(self.name, step_num, mode)
        # smdebug's order: the step state decides first, so a step past the end of a finished
        # run is StepUnavailable (has_passed_step says UNAVAILABLE once training has ended).
        if state is StepState.UNAVAILABLE:
            return StepUnavailable(step_num, mode)
        if trial.loaded_all_steps:
            return NoMoreData(step_num, mode, trial._book.last_step(mode))
        return StepNotYetAvailable(step_num, mode)

    def step(self, *args: Any, **kwargs: Any) -> Any:
        """Removed in smdebug; kept so old code fails with the same message."""
        raise SMDebugNotImplementedError(
            "step method has been removed. Please use tensor.value or tensor.reduction_value methods"
        )

    # --- values -------------------------------------------------------------------------------

    def _load(self, rec: StepRecord, loc: Location, step_num: int, mode: ModeKeys) -> np.ndarray[Any, Any]:
        return self.trial._fetcher.read(loc, self.name, step_num, mode).value

    def _raw(self, rec: StepRecord, step_num: int, mode: ModeKeys) -> np.ndarray[Any, Any] | None:
        if rec.value is not None:
            return rec.value
        if rec.location is None:
            return None
        value = self._load(rec, rec.location, step_num, mode)
        if self.cache:
            rec.value = value
        return value

    def value(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None) -> np.ndarray[Any, Any]:
        """The saved value as a numpy array (a PyTorch loss comes back with shape ``()``)."""
        rec = self._step(step_num, mode, worker)
        value = self._raw(rec, step_num, mode)
        if value is None:
            raise TensorUnavailableForStep(self.name, step_num, mode, has_reductions=bool(rec.reductions))
        return value

    def values(self, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None) -> dict[int, np.ndarray[Any, Any]]:
        """``{step: value}`` for every complete step of ``mode``."""
        return {s: self.value(s, mode=mode, worker=worker) for s in self.steps(mode=mode)}

    def shape(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None) -> tuple[int, ...]:
        """The saved shape, else the raw value's shape; ``ShapeUnavailableForStep`` otherwise."""
        rec = self._step(step_num, mode, worker)
        if rec.shape is not None:
            return rec.shape
        value = self._raw(rec, step_num, mode)
        if value is None:
            raise ShapeUnavailableForStep(self.name, step_num, mode)
        return tuple(value.shape)

    def reduction_value(
        self,
        step_num: int,
        reduction_name: str,
        mode: ModeKeys = ModeKeys.GLOBAL,
        worker: str | None = None,
        abs: bool = False,
    ) -> np.ndarray[Any, Any]:
        """The stored reduction, else one computed from the raw value with numpy."""
        rec = self._step(step_num, mode, worker)
        op = reduction_name[: -len("_norm")] if reduction_name.endswith("_norm") else reduction_name
        loc = rec.reductions.get((op, abs)) if rec.reductions else None
        if loc is not None:
            return self._load(rec, loc, step_num, mode)
        value = self._raw(rec, step_num, mode)
        if value is None:
            raise TensorUnavailableForStep(self.name, step_num, mode, has_reductions=bool(rec.reductions))
        return numpy_reduction(op, value, abs)

    def reduction_values(
        self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None
    ) -> dict[tuple[str, bool], np.ndarray[Any, Any]]:
        """``{(op, abs): value}`` of the reductions *stored* at the step."""
        rec = self._step(step_num, mode, worker)
        if not rec.reductions:
            return {}
        return {key: self._load(rec, loc, step_num, mode) for key, loc in rec.reductions.items()}
