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
from murphy.trial.tables import Span

if TYPE_CHECKING:
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


@dataclass(slots=True)
class _Want:
    name: str
    step: int  # as asked (a mode step when a mode is given)
    order: int  # position among the tensor's asked steps, so answers keep the asked order
    span: Span


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
    for name in names:
        tensor = trial.tensor(name)
        res = out[name] = BatchValues(name)
        found[name] = []
        asked = sorted(set(per_name.get(name, ()))) if per_name is not None else common
        for order, step in enumerate(tensor.steps(mode=mode) if asked is None else asked):
            res.steps.append(step)
            g = step if mode is ModeKeys.GLOBAL else trial._book.global_step(mode, step)
            files = None if g is None else step_files.get(g)
            if files is not None and len(files) == 1 and worker is None:  # one worker wrote it
                fname, view = next(iter(files.values()))
                slot = view.slots.get(name)
            else:
                by_worker = None if g is None else trial._slots(g, name)
                rec = None if by_worker is None else by_worker[min(by_worker)] if worker is None else by_worker.get(worker)
                if rec is None and by_worker is not None:
                    res.errors[step] = InvalidWorker(str(worker))
                    continue
                fname, slot = rec if rec is not None else ("", None)
            if slot is None:
                res.errors[step] = tensor._missing_error(step, mode)
                continue
            if slot.span is None or not fname:
                res.errors[step] = TensorUnavailableForStep(name, step, mode, has_reductions=bool(slot.reductions))
                continue
            by_file.setdefault(fname, []).append(_Want(name, step, order, slot.span))
    for fname, wants, buf, base in _fetched(trial, by_file, mode):
        for want in wants:
            if isinstance(buf, TensorUnavailableForStep):  # the events file never came
                out[want.name].errors[want.step] = TensorUnavailableForStep(want.name, want.step, mode)
                continue
            if not isinstance(buf, bytes):
                out[want.name].errors[want.step] = buf
                continue
            try:
                loc = (fname, *want.span)
                value = trial._fetcher.value_in(buf, want.span[0] - base, loc, want.name, want.step)
            except (SMDebugError, MurphyError) as exc:
                log.warning("skipping %s", exc)
                out[want.name].errors[want.step] = exc
                continue
            found[want.name].append((want.order, value))
    for name, res in out.items():
        # Values arrive in file order; put them back in step order, without the failed steps.
        got = sorted(found[name], key=itemgetter(0))  # already in order for one tensor: O(n)
        res.steps = [s for s in res.steps if s not in res.errors] if res.errors else res.steps
        res.values = [v for _, v in got]
    return out


def _fetched(
    trial: Trial, by_file: dict[str, list[_Want]], mode: ModeKeys
) -> Iterator[tuple[str, list[_Want], bytes | ReadError, int]]:
    """``(events file, its wants, bytes | the error, file offset of the bytes)`` per span, in
    key order (remote stores: ``FETCH_THREADS`` gets in flight)."""
    jobs: list[tuple[str, list[_Want], int, int]] = []
    for fname in sorted(by_file):
        wants = by_file[fname]
        if len(wants) > 1:
            wants.sort(key=lambda w: w.span[0])
        whole = trial._fetcher.cached(fname)
        if whole is not None:
            yield fname, wants, whole, 0
            continue
        if len(wants) == 1:  # the usual case for a scalar series: one record per step's file
            jobs.append((fname, wants, wants[0].span[0], wants[0].span[1]))
        else:
            jobs.extend((fname, group, lo, hi - lo) for group, lo, hi in _spans(wants))
    store = trial.store

    def get(job: tuple[str, list[_Want], int, int]) -> bytes | ReadError:
        fname, wants, lo, n = job
        try:
            return trial._fetcher.get_retrying(fname, lo, n, wants[0].name, wants[0].step, mode)
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
        start, length = want.span
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
