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

from murphy.core.modes import ModeKeys, as_mode
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
from murphy.trial.tables import Slot, Span

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


class Tensor:
    """A saved tensor. Steps are global unless a ``mode`` is given (then they are mode steps).

    Where it was saved lives in the trial (per step, a view of the index table); the tensor only
    caches its sorted step list and, with ``cache=True``, the values read.
    """

    def __init__(self, name: str, trial: Trial, cache: bool = False) -> None:
        self.name = name
        self.original_name: str | None = None
        self.trial = trial
        self.cache = cache
        self._values: dict[Location, np.ndarray[Any, Any]] = {}
        self._sorted: list[int] = []
        self._sorted_version = -1

    def __repr__(self) -> str:
        return f"<murphy Tensor {self.name!r} of trial {self.trial.name!r}>"

    # --- steps --------------------------------------------------------------------------------

    def _global_steps(self) -> list[int]:
        trial = self.trial
        if self._sorted_version != trial.version:
            name = self.name
            self._sorted = [g for g in trial._book.all_steps(ModeKeys.GLOBAL) if trial._saved_at(g, name)]
            self._sorted_version = trial.version
        return self._sorted

    def steps(self, mode: ModeKeys = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Steps at which this tensor (or a reduction of it) was saved, sorted."""
        mode = as_mode(mode)
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
        steps = self.steps(mode=as_mode(mode))
        prev = steps[: bisect.bisect_right(steps, step)]
        return prev[-n:] if n else prev

    def workers(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[str]:
        """Workers that saved this tensor at the step, sorted."""
        mode = as_mode(mode)
        by_worker = self._by_worker(step_num, mode)
        if by_worker is None:
            self.trial.maybe_refresh(self.name)
            by_worker = self._by_worker(step_num, mode)
        if by_worker is None:
            raise TensorUnavailableForStep(self.name, step_num, mode)
        return sorted(by_worker)

    def _by_worker(self, step_num: int, mode: ModeKeys) -> dict[str, tuple[str, Slot]] | None:
        g = step_num if mode is ModeKeys.GLOBAL else self.trial._book.global_step(mode, step_num)
        return None if g is None else self.trial._slots(g, self.name)

    def _step(self, step_num: int, mode: ModeKeys, worker: str | None) -> tuple[str, Slot]:
        """The record for the step, or smdebug's lookup error for why there is none."""
        mode = as_mode(mode)
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

    def _load(self, fname: str, span: Span, step_num: int, mode: ModeKeys) -> np.ndarray[Any, Any]:
        return self.trial._fetcher.read_value(fname, span, self.name, step_num, mode)

    def _raw(self, rec: tuple[str, Slot], step_num: int, mode: ModeKeys) -> np.ndarray[Any, Any] | None:
        fname, slot = rec
        if slot.span is None or not fname:
            # No record, or an index entry without an events file name (smdebug would fail
            # to open the trial directory itself): the value is not available.
            return None
        if not self.cache:
            return self._load(fname, slot.span, step_num, mode)
        loc = (fname, *slot.span)
        value = self._values.get(loc)
        if value is None:
            value = self._values[loc] = self._load(fname, slot.span, step_num, mode)
        return value

    def value(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None) -> np.ndarray[Any, Any]:
        """The saved value as a numpy array (a PyTorch loss comes back with shape ``()``)."""
        if mode is ModeKeys.GLOBAL and worker is None and not self.cache:
            # The common case (one worker wrote the step, raw value saved), without the dicts.
            files = self.trial._step_files.get(step_num)
            if files is not None and len(files) == 1:
                for fname, view in files.values():
                    slot = view.slots.get(self.name)
                    if slot is not None and slot.span is not None and fname:
                        return self.trial._fetcher.read_value(fname, slot.span, self.name, step_num, mode)
        rec = self._step(step_num, mode, worker)
        value = self._raw(rec, step_num, mode)
        if value is None:
            raise TensorUnavailableForStep(self.name, step_num, mode, has_reductions=bool(rec[1].reductions))
        return value

    def values(self, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None) -> dict[int, np.ndarray[Any, Any]]:
        """``{step: value}`` for every complete step of ``mode``."""
        return {s: self.value(s, mode=mode, worker=worker) for s in self.steps(mode=mode)}

    def shape(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None) -> tuple[int, ...]:
        """The saved shape, else the raw value's shape; ``ShapeUnavailableForStep`` otherwise."""
        rec = self._step(step_num, mode, worker)
        if rec[1].shape is not None:
            return rec[1].shape
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
        reductions = rec[1].reductions
        op = reduction_name[: -len("_norm")] if reduction_name.endswith("_norm") else reduction_name
        span = reductions.get((op, abs)) if reductions else None
        if span is not None and rec[0]:
            return self._load(rec[0], span, step_num, mode)
        value = self._raw(rec, step_num, mode)
        if value is None:
            raise TensorUnavailableForStep(self.name, step_num, mode, has_reductions=bool(reductions))
        return numpy_reduction(op, value, abs)

    def reduction_values(
        self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None
    ) -> dict[tuple[str, bool], np.ndarray[Any, Any]]:
        """``{(op, abs): value}`` of the reductions *stored* at the step."""
        fname, slot = self._step(step_num, mode, worker)
        if not slot.reductions or not fname:
            return {}
        return {key: self._load(fname, span, step_num, mode) for key, span in slot.reductions.items()}
