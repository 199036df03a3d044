"""A job's saved tensors as the dashboard asks for them, read through ``murphy.trial`` and cached.

Every saved value is read once: :class:`TensorCache` keeps, per tensor, the per-step statistics
(min, max, mean, l2, NaN and Inf counts, shape, dtype) of the steps it has seen, and on each
request reads only the steps that arrived since (the trial's refresh lists only new index
files). New steps are read in one batch (:meth:`murphy.trial.Trial.tensor_values`: one request
per events file, all the asked tensors' records of it at once), scalars' statistics in a few
array operations (:mod:`murphy.ui.stepstats`). A 100k-step series therefore costs one pass over
the files the first time and an array slice afterwards; a running job's new steps are read as
they land.

Steps are global steps (``ModeKeys.GLOBAL``), as the rules report them.
"""

from __future__ import annotations

import bisect
import io
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from murphy.exceptions import MissingCollectionFiles, MurphyError, SMDebugError, TensorUnavailable
from murphy.trial import Trial, create_trial, no_refresh
from murphy.ui.stepstats import STATS, all_scalars, scalar_columns, step_stats

#: stored reductions that can stand in for a statistic when only reductions were saved
_FROM_REDUCTION = {"min": "min", "max": "max", "mean": "mean", "l2": "l2"}
#: fewer new steps than this are read one by one (a live poll's one or two new steps)
BATCH_MIN_STEPS = 8

__all__ = ["STATS", "CacheRegistry", "TensorCache", "TensorSeries", "step_stats"]


@dataclass
class TensorSeries:
    """Per-step statistics of one tensor; ``cols[i][k]`` is ``STATS[i]`` at ``steps[k]``."""

    name: str
    steps: list[int] = field(default_factory=list)
    cols: list[list[float]] = field(default_factory=lambda: [[] for _ in STATS])
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    dtype: str = ""
    _arrays: tuple[int, np.ndarray[Any, Any], np.ndarray[Any, Any]] | None = None
    _first: tuple[int, int] | None = None
    _scanned: int = 0
    #: the trial's (version, ended) when this series was last brought up to date
    seen: tuple[int, bool] | None = None

    def column(self, stat: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """``(steps, values)`` as arrays (rebuilt only when steps were added)."""
        if self._arrays is None or self._arrays[0] != len(self.steps):
            self._arrays = (len(self.steps), np.asarray(self.steps, dtype=np.int64),
                            np.asarray(self.cols, dtype=np.float64).reshape(len(STATS), -1))
        i = STATS.index(stat)
        return self._arrays[1], self._arrays[2][i]

    def first_nonfinite(self) -> tuple[int, int] | None:
        """``(step, index)`` of the first step with a NaN or Inf element (scanned once: only
        the steps added since the last call are looked at)."""
        if self._first is None:
            nan, inf = self.cols[STATS.index("nan_count")], self.cols[STATS.index("inf_count")]
            for k in range(self._scanned, len(self.steps)):
                if nan[k] > 0 or inf[k] > 0:
                    self._first = (self.steps[k], k)
                    break
            self._scanned = len(self.steps)
        return self._first


class TensorCache:
    """The tensors of one job. ``opener`` returns its trial store (an ObjectStore or path)."""

    def __init__(self, opener: Callable[[], Any], *, poll_interval: float = 0.2) -> None:
        self._opener = opener
        self._poll = poll_interval
        self._trial: Trial | None = None
        self._series: dict[str, TensorSeries] = {}
        self._memo: dict[Any, tuple[tuple[int, bool], Any]] = {}
        self._lock = threading.RLock()

    # --- the trial --------------------------------------------------------------------------

    def trial(self) -> Trial | None:
        """The trial, or None while the job has written no collections file yet."""
        with self._lock:
            if self._trial is None:
                try:
                    self._trial = create_trial(self._opener(), poll_interval=self._poll, no_marker_timeout=0,
                                               missing_event_timeout=2.0)
                except MissingCollectionFiles:
                    return None
            return self._trial

    def version(self) -> tuple[int, bool]:
        """Changes whenever the trial indexed something new or training ended (refreshing it
        at most every poll interval)."""
        trial = self.trial()
        if trial is None:
            return (-1, False)
        trial.maybe_refresh()
        return (trial.version, trial.loaded_all_steps)

    def memo(self, key: Any, build: Callable[[], Any]) -> Any:
        """``build()``, reused while :meth:`version` is unchanged (whole-job documents)."""
        with self._lock:
            version = self.version()
            hit = self._memo.get(key)
            if hit is not None and hit[0] == version:
                return hit[1]
            value = build()
            if len(self._memo) > 64:
                self._memo.clear()
            self._memo[key] = (version, value)
            return value

    def steps(self) -> list[int]:
        trial = self.trial()
        return [] if trial is None else trial.steps()

    def ended(self) -> bool:
        trial = self.trial()
        return trial is not None and trial.loaded_all_steps

    def names(self, regex: str | None = None, collection: str | None = None) -> list[str]:
        trial = self.trial()
        if trial is None:
            return []
        pattern = re.compile(regex) if regex else None
        names = trial.tensor_names(collection=collection) if collection else trial.tensor_names()
        return [n for n in names if pattern is None or pattern.search(n)]

    def collections(self) -> dict[str, list[str]]:
        trial = self.trial()
        if trial is None:
            return {}
        names = trial.tensor_names()
        out = {}
        for cname, coll in sorted(trial.collections().items()):
            out[cname] = [n for n in names if coll.matches(n)]
        return out

    # --- statistics ---------------------------------------------------------------------------

    def series(self, name: str) -> TensorSeries:
        """``name``'s statistics, brought up to date with the trial's complete steps."""
        return self._update([name])[0]

    def _update(self, names: list[str]) -> list[TensorSeries]:
        """The series of ``names``, each brought up to date; the new steps of all of them are
        read in one batch (a heatmap's 1,000 layers share each step's events file)."""
        with self._lock:
            trial = self.trial()
            if trial is None:  # nothing saved yet
                return [TensorSeries(n) for n in names]
            version = self.version()  # the one refresh of this request
            # Frozen from here on: each tensor's steps() would otherwise refresh the live trial
            # again (a listing and an end-marker check per name: 1,000 for one heatmap).
            with no_refresh(trial):
                return self._update_frozen(trial, names, version)

    def _update_frozen(self, trial: Trial, names: list[str], version: tuple[int, bool]) -> list[TensorSeries]:
        out: list[TensorSeries] = []
        new: dict[str, list[int]] = {}
        for name in names:
            if not trial.has_tensor(name):
                raise TensorUnavailable(name)
            s = self._series.get(name)
            if s is None:
                s = self._series[name] = TensorSeries(name)
            out.append(s)
            if s.seen == version:  # nothing new was indexed since: no step list to walk
                continue
            steps = trial.tensor(name).steps()
            fresh = steps[bisect.bisect_right(steps, s.steps[-1]) if s.steps else 0 :]
            if fresh:
                new[name] = fresh
        if sum(map(len, new.values())) >= BATCH_MIN_STEPS:
            self._append_batch(trial, new)
        else:
            for name, fresh in new.items():
                tensor = trial.tensor(name)
                s = self._series[name]
                for step in fresh:
                    stats, shape, dtype = self._read(tensor, step)
                    self._append(s, [step], [[v] for v in stats], [shape], dtype)
        for s in out:  # only once read: a read that raised is tried again next time
            s.seen = version
        return out

    def _append_batch(self, trial: Trial, new: dict[str, list[int]]) -> None:
        for name, got in trial.tensor_values(list(new), new).items():
            s = self._series[name]
            if not got.errors and all_scalars(got.values):  # the common case: a loss, a metric
                shapes = [v.shape for v in got.values]
                dtype = str(got.values[0].dtype) if got.values else ""
                self._append(s, got.steps, scalar_columns(got.values), shapes, dtype)
                continue
            # Values in step order; a step whose value did not read falls back to reductions.
            tensor, values = trial.tensor(name), iter(got.values)
            for step in new[name]:
                if step in got.errors:
                    stats, shape, dtype = self._from_reductions(tensor, step)
                else:
                    value = next(values)
                    stats, shape, dtype = step_stats(value), tuple(value.shape), str(value.dtype)
                self._append(s, [step], [[v] for v in stats], [shape], dtype)

    @staticmethod
    def _append(s: TensorSeries, steps: list[int], cols: list[list[float]], shapes: list[tuple[int, ...]],
                dtype: str) -> None:
        s.steps.extend(steps)
        for col, vals in zip(s.cols, cols, strict=True):
            col.extend(vals)
        s.shapes.extend(shapes)
        s.dtype = s.dtype or dtype

    @classmethod
    def _read(cls, tensor: Any, step: int) -> tuple[tuple[float, ...], tuple[int, ...], str]:
        try:
            value = tensor.value(step)
            return step_stats(value), tuple(np.shape(value)), str(np.asarray(value).dtype)
        except (SMDebugError, MurphyError):
            return cls._from_reductions(tensor, step)

    @staticmethod
    def _from_reductions(tensor: Any, step: int) -> tuple[tuple[float, ...], tuple[int, ...], str]:
        # Only reductions (or a damaged record): take what the stored reductions give; the
        # counts are then "at least one" (1) or "none" (0), unknown (NaN) when nothing was read.
        stats = [math.nan] * len(STATS)
        got: list[float] = []
        for stat, op in _FROM_REDUCTION.items():
            try:
                # A stored reduction reads back as one number of shape (1,) (numpy 2 refuses
                # float() of that), a computed one as shape (): take the one element either way.
                red = np.asarray(tensor.reduction_value(step, op))
                if red.size != 1:
                    continue
                stats[STATS.index(stat)] = float(red.reshape(-1)[0])
                got.append(stats[STATS.index(stat)])
            except (SMDebugError, MurphyError, TypeError, ValueError):
                continue
        stats[0] = stats[STATS.index("l2")]
        if got:
            stats[5] = 1.0 if any(math.isnan(v) for v in got) else 0.0
            stats[6] = 1.0 if any(math.isinf(v) for v in got) else 0.0
        return tuple(stats), (), ""

    def value(self, name: str, step: int) -> np.ndarray[Any, Any]:
        trial = self.trial()
        if trial is None:
            raise MissingCollectionFiles("the job has saved no tensors yet")
        return np.asarray(trial.tensor(name).value(step))

    def npy(self, name: str, step: int) -> bytes:
        buf = io.BytesIO()
        np.save(buf, self.value(name, step), allow_pickle=False)
        return buf.getvalue()

    def all_series(self, names: list[str] | None = None) -> list[TensorSeries]:
        return self._update(self.names() if names is None else names)


class CacheRegistry:
    """One :class:`TensorCache` per job, the least recently used dropped beyond ``size``."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._caches: dict[str, TensorCache] = {}
        self._lock = threading.Lock()

    def get(self, key: str, opener: Callable[[], Any]) -> TensorCache:
        with self._lock:
            cache = self._caches.pop(key, None) or TensorCache(opener)
            self._caches[key] = cache
            while len(self._caches) > self.size:
                self._caches.pop(next(iter(self._caches)))
            return cache
