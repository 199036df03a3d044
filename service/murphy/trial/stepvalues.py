"""Whole-step queries of a trial: the write order of a step, and smdebug's ``inputs`` /
``labels`` / ``predictions`` (every matching tensor's value at one step).

Functions over a :class:`~murphy.trial.trial.Trial`, which exposes them as methods; they read
only the trial's step map and its public tensor API.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from murphy.core.collection import CollectionKeys
from murphy.core.modes import ModeKeys, as_mode

if TYPE_CHECKING:
    from murphy.trial.trial import Trial


def suffix_number(name: str) -> int:
    """smdebug's ``_tensor_name_sorter``: the number after the last ``_`` (0 if none)."""
    tail = name.rsplit("_", 1)[-1] if re.match(r".+_\d+", name) else "0"
    return int(tail) if tail.isdigit() else 0


def write_order(trial: Trial, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[str]:
    """Names saved at ``step`` in the order the hook wrote them (see :meth:`Trial.write_order`)."""
    mode = as_mode(mode)
    trial.maybe_refresh()
    g = trial._book.global_step(mode, step)
    files = trial._step_files.get(g) if g is not None else None
    if not files:
        return []
    seen: dict[str, None] = {}
    for worker in sorted(files):
        seen.update(dict.fromkeys(files[worker][1].slots))
    return list(seen)


def _values_of(trial: Trial, names: list[str], step: int, mode: ModeKeys) -> list[np.ndarray[Any, Any]]:
    # smdebug orders these by the names' numeric suffix (input_2 before input_10).
    return [trial.tensor(n).value(step, mode=mode) for n in sorted(names, key=suffix_number)]


def inputs(trial: Trial, step: int, mode: ModeKeys) -> list[np.ndarray[Any, Any]]:
    if CollectionKeys.INPUTS not in trial.collections():
        return []
    return _values_of(trial, trial.tensor_names(step=step, mode=mode, collection=CollectionKeys.INPUTS), step, mode)


def labels(trial: Trial, step: int, mode: ModeKeys) -> list[np.ndarray[Any, Any]]:
    return _values_of(trial, trial.tensor_names(step=step, mode=mode, regex="labels*"), step, mode)


def predictions(trial: Trial, step: int, mode: ModeKeys) -> list[np.ndarray[Any, Any]]:
    return _values_of(trial, trial.tensor_names(step=step, mode=mode, regex="predictions*"), step, mode)
