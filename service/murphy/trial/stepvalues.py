"""Whole-step queries of a trial: the write order of a step, and smdebug's ``inputs`` /
``labels`` / ``predictions`` (every matching tensor's value at one step).

:class:`StepQueries` gives them to :class:`~murphy.trial.trial.Trial` as methods. ``inputs`` /
``labels`` / ``predictions`` read only the public reader API (:class:`StepReader`), so one
worker's :class:`~murphy.trial.worker_view.WorkerView` answers them with the same code, over
what that worker saved; ``write_order`` reads the trial's per-worker files (``Trial.files_at``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np

from murphy.core.collection import Collection, CollectionKeys
from murphy.core.modes import ModeKeys, as_mode
from murphy.trial.tables import TableView

Array = np.ndarray[Any, Any]


class StepTensor(Protocol):
    """What :class:`StepReader` needs of a tensor: its value at a step."""

    def value(self, step_num: int, /, mode: ModeKeys = ...) -> Array: ...


class StepReader(Protocol):
    """What ``inputs`` / ``labels`` / ``predictions`` read: a trial or one worker's view of it."""

    def collections(self) -> Mapping[str, Collection]: ...

    def tensor_names(self, show_prefixed_tensors: bool = ..., *, step: int | None = ...,
                     mode: ModeKeys = ..., regex: str | Iterable[str] | None = ...,
                     collection: str | Collection | None = ...) -> list[str]: ...

    def tensor(self, tname: str, /) -> StepTensor: ...


class FilesReader(Protocol):
    """What ``write_order`` reads: a trial's per-worker index files at a step."""

    def maybe_refresh(self, name: str | None = ...) -> None: ...

    def files_at(self, step: int, mode: ModeKeys = ...) -> Mapping[str, tuple[str, TableView]]: ...


def suffix_number(name: str) -> int:
    """smdebug's ``_tensor_name_sorter``: the number after the last ``_`` (0 if none)."""
    tail = name.rsplit("_", 1)[-1] if re.match(r".+_\d+", name) else "0"
    return int(tail) if tail.isdigit() else 0


def write_order(trial: FilesReader, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[str]:
    """Names saved at ``step`` in the order the hook wrote them (see :meth:`StepQueries.write_order`)."""
    mode = as_mode(mode)
    trial.maybe_refresh()
    files = trial.files_at(step, mode)
    seen: dict[str, None] = {}
    for worker in sorted(files):
        seen.update(dict.fromkeys(files[worker][1].slots))
    return list(seen)


def _values_of(reader: StepReader, names: list[str], step: int, mode: ModeKeys) -> list[Array]:
    # smdebug orders these by the names' numeric suffix (input_2 before input_10).
    return [reader.tensor(n).value(step, mode=mode) for n in sorted(names, key=suffix_number)]


def inputs(reader: StepReader, step: int, mode: ModeKeys) -> list[Array]:
    if CollectionKeys.INPUTS not in reader.collections():
        return []
    return _values_of(reader, reader.tensor_names(step=step, mode=mode, collection=CollectionKeys.INPUTS), step, mode)


def labels(reader: StepReader, step: int, mode: ModeKeys) -> list[Array]:
    return _values_of(reader, reader.tensor_names(step=step, mode=mode, regex="labels*"), step, mode)


def predictions(reader: StepReader, step: int, mode: ModeKeys) -> list[Array]:
    return _values_of(reader, reader.tensor_names(step=step, mode=mode, regex="predictions*"), step, mode)


class StepQueries:
    """smdebug's whole-step methods, for :class:`~murphy.trial.trial.Trial` (``write_order``: a
    :class:`FilesReader`) and any :class:`StepReader` (``inputs`` / ``labels`` / ``predictions``:
    a WorkerView too)."""

    def write_order(self: FilesReader, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[str]:
        """Names saved at ``step`` in the order the hook wrote them (murphy extension).

        Within a step the hook writes parameters, then layer inputs/outputs in forward order,
        then the loss, then gradients as backward produces them: write order is the order of
        computation, so the first bad tensor in it is where a NaN cascade started. Workers are
        taken in name order; a name appears once, at its first write.
        """
        return write_order(self, step, mode)

    def inputs(self: StepReader, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[Array]:
        """Values of the ``inputs`` collection's tensors at the step, by name."""
        return inputs(self, step, mode)

    def labels(self: StepReader, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[Array]:
        """Values of the tensors named like ``labels`` at the step."""
        return labels(self, step, mode)

    def predictions(self: StepReader, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[Array]:
        """Values of the tensors named like ``predictions`` at the step."""
        return predictions(self, step, mode)
