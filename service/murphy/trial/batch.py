"""Reading a few tensors over many steps at once: one request per events file, not per value.

``Tensor.value`` is built for a rule's pattern (one step at a time, as steps arrive): each call
looks the step up, gets one ranged record and decodes it. A dashboard opening a 100,000-step job
wants the opposite: every step of one tensor, now. :func:`read_values` resolves every
``(tensor, step)`` from the trial's step map first, groups the records by events file, fetches
each file's needed span once (the span from its first to its last wanted record; concurrently on
remote stores) and decodes each record with the trial's decoder, the one ``value()`` uses.

The answer is what per-step ``value()`` calls would give: the same arrays, and for a step whose
value cannot be read (a damaged or cut-off record, a missing events file, only reductions saved,
a step not saved) the exception ``value()`` would raise, kept per step instead of raised, so one
corrupt file never costs the other steps.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from murphy.core.modes import ModeKeys, as_mode
from murphy.exceptions import InvalidWorker, MurphyError, SMDebugError, TensorUnavailableForStep
from murphy.storage.local import LocalObjectStore
from murphy.storage.memory import InMemoryObjectStore

if TYPE_CHECKING:
    from murphy.trial.tensor import Tensor
    from murphy.trial.trial import Trial

log = logging.getLogger(__name__)

FETCH_THREADS = 16
"""Concurrent ranged gets on remote stores (local and in-memory stores are read in order)."""
_CHUNK = 512  # files fetched per round on remote stores: bounds the bytes held at once
MAX_SPAN = 8 << 20
"""A file's wanted records farther apart than this are fetched one by one, not as one span."""

ReadError = SMDebugError | MurphyError


@dataclass
class BatchValues:
    """One tensor's values over the steps asked for. ``steps[k]`` holds ``values[k]``; a step
    whose value could not be read is in ``errors`` with what ``value()`` would have raised."""

    name: str
    steps: list[int] = field(default_factory=list)
    values: list[np.ndarray[Any, Any]] = field(default_factory=list)
    errors: dict[int, ReadError] = field(default_factory=dict)


_Want = tuple[str, int, int, int, int]
"""``(name, step as asked, order among the tensor's asked steps, record start, record length)``."""


def read_values(
    trial: Trial,
    names: Sequence[str],
    steps: Iterable[int] | Mapping[str, Iterable[int]] | None = None,
    *,
    mode: ModeKeys = ModeKeys.GLOBAL,
    worker: str | None = None,
) -> dict[str, BatchValues]:
    """``{name: BatchValues}`` of ``names`` at ``steps`` (steps of ``mode``; per name when a
    mapping; every complete step of each tensor when None), as
    ``trial.tensor(name).value(step, mode, worker)`` would read them.

    An unknown name raises ``TensorUnavailable`` as ``trial.tensor`` does.
    """
    mode = as_mode(mode)
    trial.maybe_refresh()
    per_name: Mapping[str, Iterable[int]] | None = None
    common: list[int] | None = None
    if isinstance(steps, Mapping):
        per_name = steps
    elif steps is not None:
        common = sorted(set(steps))
    found: dict[str, list[tuple[int, np.ndarray[Any, Any]]]] = {}
    out: dict[str, BatchValues] = {}
    by_file: dict[str, list[_Want]] = {}
    step_files = trial._step_files
    simple = mode is ModeKeys.GLOBAL and worker is None
    for name in names:
        tensor = trial.tensor(name)
        asked = sorted(set(per_name.get(name, ()))) if per_name is not None else common
        res = out[name] = BatchValues(name, list(tensor.steps(mode=mode) if asked is None else asked))
        found[name] = []
        errors = res.errors
        for order, step in enumerate(res.steps):
            if simple:  # the usual case, without building the per-worker dict: one worker wrote it
                files = step_files.get(step)
                if files is not None and len(files) == 1:
                    for fname, view in files.values():
                        slot = view.slots.get(name)
                        if slot is not None and slot.span is not None and fname:
                            wants = by_file.get(fname)
                            if wants is None:
                                wants = by_file[fname] = []
                            wants.append((name, step, order, *slot.span))
                            break
                    else:
                        _resolve(trial, tensor, name, step, order, mode, worker, by_file, errors)
                    continue
            _resolve(trial, tensor, name, step, order, mode, worker, by_file, errors)
    decode = trial._fetcher.value_in
    for fname, wants, buf, base in _fetched(trial, by_file, mode):
        if not isinstance(buf, bytes):
            missing = isinstance(buf, TensorUnavailableForStep)  # the events file never came
            for name, step, _, _, _ in wants:
                out[name].errors[step] = TensorUnavailableForStep(name, step, mode) if missing else buf
            continue
        for name, step, order, start, length in wants:
            try:
                value = decode(buf, start - base, fname, start, length, name, step)
            except (SMDebugError, MurphyError) as exc:
                log.warning("skipping %s", exc)
                out[name].errors[step] = exc
                continue
            found[name].append((order, value))
    for name, res in out.items():
        # Values arrive in file order; put them back in step order, without the failed steps.
        got = sorted(found[name], key=itemgetter(0))  # already in order for one tensor: O(n)
        if res.errors:
            res.steps = [s for s in res.steps if s not in res.errors]
        res.values = [v for _, v in got]
    return out


def _resolve(trial: Trial, tensor: Tensor, name: str, step: int, order: int, mode: ModeKeys, worker: str | None,
             by_file: dict[str, list[_Want]], errors: dict[int, ReadError]) -> None:
    """The general lookup of one ``(tensor, step)``: a want for its file, or the error."""
    g = step if mode is ModeKeys.GLOBAL else trial._book.global_step(mode, step)
    by_worker = None if g is None else trial._slots(g, name)
    if by_worker is None:
        errors[step] = tensor._missing_error(step, mode)
        return
    rec = by_worker[min(by_worker)] if worker is None else by_worker.get(worker)
    if rec is None:
        errors[step] = InvalidWorker(str(worker))
        return
    fname, slot = rec
    if slot.span is None or not fname:
        errors[step] = TensorUnavailableForStep(name, step, mode, has_reductions=bool(slot.reductions))
        return
    by_file.setdefault(fname, []).append((name, step, order, *slot.span))


def _fetched(
    trial: Trial, by_file: dict[str, list[_Want]], mode: ModeKeys
) -> Iterator[tuple[str, list[_Want], bytes | ReadError, int]]:
    """``(events file, its wants, bytes | the error, file offset of the bytes)`` per span, in
    key order (remote stores: ``FETCH_THREADS`` gets in flight)."""
    jobs: list[tuple[str, list[_Want], int, int]] = []
    for fname in sorted(by_file):
        wants = by_file[fname]
        if len(wants) > 1:
            wants.sort(key=itemgetter(3))
        whole = trial._fetcher.cached(fname)
        if whole is not None:
            yield fname, wants, whole, 0
            continue
        if len(wants) == 1:  # the usual case for a scalar series: one record per step's file
            jobs.append((fname, wants, wants[0][3], wants[0][4]))
        else:
            jobs.extend((fname, group, lo, hi - lo) for group, lo, hi in _spans(wants))
    store = trial.store

    def get(job: tuple[str, list[_Want], int, int]) -> bytes | ReadError:
        fname, wants, lo, n = job
        try:
            return trial._fetcher.get_retrying(fname, lo, n, wants[0][0], wants[0][1], mode)
        except (SMDebugError, MurphyError) as exc:  # missing for good, or a store error
            return exc

    if isinstance(store, (LocalObjectStore, InMemoryObjectStore)) or len(jobs) < 2:
        for job in jobs:
            yield job[0], job[1], get(job), job[2]
        return
    with ThreadPoolExecutor(min(FETCH_THREADS, len(jobs)), thread_name_prefix="murphy-trial-batch") as pool:
        for i in range(0, len(jobs), _CHUNK):
            chunk = jobs[i : i + _CHUNK]
            for job, data in zip(chunk, pool.map(get, chunk), strict=True):
                yield job[0], job[1], data, job[2]


def _spans(wants: list[_Want]) -> Iterator[tuple[list[_Want], int, int]]:
    """Runs of ``wants`` (sorted by offset) fetched as one range each: a new run starts where the
    next record lies more than ``MAX_SPAN`` past the current run's start."""
    group: list[_Want] = []
    lo = hi = 0
    for want in wants:
        start, length = want[3], want[4]
        if group and start + length - lo > MAX_SPAN:
            yield group, lo, hi
            group = []
        if not group:
            lo = start
            hi = start + length
        group.append(want)
        hi = max(hi, start + length)
    if group:
        yield group, lo, hi
