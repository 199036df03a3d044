"""Fetching tensor records: ranged reads, a small whole-file cache, and S3-lag retries.

Every value is one framed record at ``(event_file_name, start_idx, length)``. The first read of
an events file is a ranged get of just that record. The second read of the *same* file fetches
the whole file once (its size is known from the index) and keeps it in a byte-bounded LRU, so
reading many tensors of one step costs two requests instead of one per tensor. A file is fetched
whole at most once: after it is evicted, reads go back to ranged gets, so a scan pattern that
thrashes the LRU never costs more than about twice the ranged reads.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from murphy.core.modes import ModeKeys
from murphy.exceptions import (
    CorruptRecord,
    ObjectNotFound,
    TensorUnavailableForStep,
    TruncatedRecord,
    UnsupportedDType,
)
from murphy.storage.base import ObjectStore
from murphy.tensorio.events import TensorEvent
from murphy.tensorio.fastpath import RecordDecoder
from murphy.tensorio.locations import EVENTS_PREFIX, parse_event_key

log = logging.getLogger(__name__)

Location = tuple[str, int, int]
"""``(event_file_name, start_idx, length)`` of one framed record, as the index file gives it."""

WHOLE_FILE_LIMIT = 1 << 20
"""Events files up to this size may be fetched whole (one S3 GET costs the same up to ~1 MiB)."""
FILE_CACHE_BYTES = 64 << 20
"""Bound on the bytes of whole events files kept in memory per trial."""

_NEVER, _ONCE, _WHOLE = 0, 1, 2


class RecordFetcher:
    """Reads and decodes single tensor records for one trial."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        file_sizes: dict[str, int],
        missing_event_timeout: float,
        poll_interval: float,
        training_ended: Callable[[], bool],
        cache_bytes: int = FILE_CACHE_BYTES,
        whole_file_limit: int = WHOLE_FILE_LIMIT,
    ) -> None:
        self._store = store
        self._file_sizes = file_sizes
        self._missing_timeout = missing_event_timeout
        self._poll = max(poll_interval, 0.01)
        self._training_ended = training_ended
        self._cache_bytes = cache_bytes
        self._whole_limit = whole_file_limit
        self._files: OrderedDict[str, bytes] = OrderedDict()
        self._held = 0
        self._seen: dict[str, int] = {}
        self._decoder = RecordDecoder()

    def clear(self) -> None:
        """Drop the cached files."""
        self._files.clear()
        self._held = 0

    def read(self, loc: Location, tname: str, step: int, mode: ModeKeys) -> TensorEvent:
        """Decode the record at ``loc``; ``tname``/``step``/``mode`` are for error messages."""
        fname, start, length = loc
        buf = self._files.get(fname)
        if buf is not None:
            self._files.move_to_end(fname)
            offset = start
        else:
            buf, offset = self._fetch(loc, tname, step, mode)
        try:
            return self._decoder.decode(buf, offset, length, tname)
        except (TruncatedRecord, UnsupportedDType, CorruptRecord) as exc:
            raise self._worded(exc, loc, tname, step) from exc

    def value_in(
        self, buf: bytes, offset: int, fname: str, start: int, length: int, tname: str, step: int
    ) -> np.ndarray[Any, Any]:
        """The value of the record at ``(fname, start, length)`` whose bytes begin at
        ``buf[offset]`` (a buffer the caller fetched: a bulk read's span of a file); raises like
        :meth:`read`."""
        try:
            return self._decoder.value(buf, offset, length, tname)
        except (TruncatedRecord, UnsupportedDType, CorruptRecord) as exc:
            raise self._worded(exc, (fname, start, length), tname, step) from exc

    def cached(self, fname: str) -> bytes | None:
        """The whole events file if it is in the cache."""
        return self._files.get(fname)

    def get_retrying(self, fname: str, start: int, length: int | None, tname: str, step: int, mode: ModeKeys) -> bytes:
        """A ranged get that waits out S3 lag like the single reads do (see :meth:`_get_retrying`)."""
        return self._get_retrying(fname, start, length, tname, step, mode)

    def _worded(self, exc: Exception, loc: Location, tname: str, step: int) -> Exception:
        what = self._what(loc, tname, step)
        if isinstance(exc, TruncatedRecord):
            return TruncatedRecord(f"{what}: record is cut short: {exc}")
        if isinstance(exc, UnsupportedDType):
            return UnsupportedDType(f"{what}: {exc}")
        return CorruptRecord(f"{what}: record is damaged: {exc}")

    def read_value(self, fname: str, span: tuple[int, int], tname: str, step: int, mode: ModeKeys) -> np.ndarray[Any, Any]:
        """``read((fname, *span), ...).value``: the trial's hot path, without building events."""
        buf = self._files.get(fname)
        if buf is None:
            return self.read((fname, span[0], span[1]), tname, step, mode).value
        self._files.move_to_end(fname)
        try:
            return self._decoder.value(buf, span[0], span[1], tname)
        except (CorruptRecord, UnsupportedDType):
            return self.read((fname, span[0], span[1]), tname, step, mode).value  # re-raises, worded

    @staticmethod
    def _what(loc: Location, tname: str, step: int) -> str:
        return f"tensor {tname!r} at step {step} ({loc[0]} bytes {loc[1]}+{loc[2]})"

    def _fetch(self, loc: Location, tname: str, step: int, mode: ModeKeys) -> tuple[bytes, int]:
        """The bytes holding the record and its offset in them (whole file or ranged get)."""
        fname, start, length = loc
        state = self._seen.get(fname, _NEVER)
        size = self._file_sizes.get(fname, 0)
        if state == _ONCE and 0 < size <= self._whole_limit:
            whole = self._get_retrying(fname, 0, None, tname, step, mode)
            self._seen[fname] = _WHOLE
            self._remember(fname, whole)
            return whole, start
        if state == _NEVER:
            if len(self._seen) > 1_000_000:  # bound the bookkeeping on endless scans
                self._seen.clear()
            self._seen[fname] = _ONCE
        return self._get_retrying(fname, start, length, tname, step, mode), 0

    def _remember(self, fname: str, data: bytes) -> None:
        if len(data) > self._cache_bytes:
            return
        self._files[fname] = data
        self._held += len(data)
        while self._held > self._cache_bytes:
            _, old = self._files.popitem(last=False)
            self._held -= len(old)

    def _get_retrying(
        self, fname: str, start: int, length: int | None, tname: str, step: int, mode: ModeKeys
    ) -> bytes:
        """A get that tolerates an events file not there yet (S3 sync lag, smdebug §c).

        The index is published after its events file, so a missing events file is normally
        lag: retry until ``missing_event_timeout``. Give up early, with
        ``TensorUnavailableForStep``, when training has ended or a later events file of the same
        worker exists (then this one will never come).
        """
        deadline = time.monotonic() + self._missing_timeout
        while True:
            try:
                return self._store.get(fname, start, length)
            except ObjectNotFound:
                pass
            if self._training_ended() or self._later_event_exists(fname) or time.monotonic() >= deadline:
                log.warning("events file %s is missing; tensor %s unavailable at step %s", fname, tname, step)
                raise TensorUnavailableForStep(tname, step, mode) from None
            time.sleep(self._poll)

    def _later_event_exists(self, fname: str) -> bool:
        parsed = parse_event_key(fname)
        if parsed is None:
            return False
        _, worker = parsed
        for key in self._store.list(EVENTS_PREFIX, start_after=fname):
            later = parse_event_key(key)
            if later is not None and later[1] == worker:
                return True
        return False
