"""Writing one step: the events file, then the index file that points into it.

The store's ``put`` is atomic, and the events file is put before its index, so a reader that
discovers steps through index files never sees an index without its events (on stores with
read-after-write consistency).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

from murphy.core.collection import CollectionsDoc
from murphy.core.modes import ModeKeys
from murphy.exceptions import SMDebugRuntimeError
from murphy.storage.base import ObjectStore, put_parts
from murphy.tensorio.events import encode_tensor_event_parts
from murphy.tensorio.float_step import FloatSteps
from murphy.tensorio.framing import Buffer, frame_parts
from murphy.tensorio.index import IndexEntry, ShapeEntry, StepIndex
from murphy.tensorio.locations import (
    DEFAULT_WORKER_NAME,
    END_OF_TRAINING_KEY,
    collections_file_key,
    event_file_key,
    index_file_key,
)

STREAM_CHUNK = 256 << 10
STREAM_PARTS = 48


class StepWriter:
    """Buffers the records of one (global step, worker) and writes them on :meth:`close`.

    Each :meth:`add` encodes (and, unless ``copy=False``, copies) the tensor at once, so the
    caller may reuse or mutate its array afterwards. Zero-size arrays are skipped, as smdebug does. Nothing is
    written for a step with no records and no shapes. Usable as a context manager.
    """

    def __init__(
        self,
        store: ObjectStore,
        step: int,
        worker: str = DEFAULT_WORKER_NAME,
        mode: ModeKeys = ModeKeys.GLOBAL,
        mode_step: int | None = None,
        *,
        stream: bool = False,
    ) -> None:
        self.store = store
        self.step = step
        self.worker = worker
        self.mode = ModeKeys(mode)
        self.mode_step = step if mode_step is None else mode_step
        self.event_file_name = event_file_key(step, worker)
        self.index_file_name = index_file_key(step, worker)
        self._parts: list[Buffer] = []
        self._entries: list[IndexEntry] = []
        self._shapes: list[ShapeEntry] = []
        self._offset = 0
        self._closed = False
        #: The index file's bytes once :meth:`close` wrote it (the step manifest packs them).
        self.index_bytes: bytes | None = None
        # Streaming (stores with open_parts): records go to the temp file in runs of about
        # STREAM_CHUNK bytes as they are added, so a writer thread holds the GIL only briefly
        # between system calls (each releases it) instead of for a whole step's encoding.
        self._open_parts = getattr(store, "open_parts", None) if stream else None
        self._file: Any = None
        self._buffered = 0

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def num_records(self) -> int:
        """How many tensor records are buffered."""
        return len(self._entries)

    def add(
        self,
        name: str,
        array: Any,
        *,
        shape_of: Sequence[int] | None = None,
        original_dtype: str | None = None,
        wall_time: float | None = None,
        copy: bool = True,
    ) -> IndexEntry | None:
        """Buffer one tensor record; returns its index entry (None if skipped: zero-size).

        ``shape_of`` also records that shape in the index's ``shape_payload``. With
        ``copy=False`` the record keeps a view of ``array`` (no copy) until :meth:`close` writes
        it: the caller must not change the array before then (the hook's writer owns its
        snapshots, so it passes False).
        """
        self._check_open()
        if shape_of is not None:
            self.add_shape(name, shape_of)
        if getattr(array, "size", 1) == 0:
            return None
        payload = encode_tensor_event_parts(
            name, array, step=self.step, mode=self.mode, mode_step=self.mode_step,
            wall_time=wall_time, original_dtype=original_dtype, copy=copy,
        )
        parts, length = frame_parts(payload)
        entry = IndexEntry(name, self._offset, length)
        self._parts.extend(parts)
        self._entries.append(entry)
        self._offset += length
        if self._open_parts is not None:
            self._buffered += length
            if self._buffered >= STREAM_CHUNK or len(self._parts) >= STREAM_PARTS:
                self._drain()
        return entry

    def _drain(self) -> None:
        if self._file is None:
            self._file = self._open_parts(self.event_file_name)  # type: ignore[misc]
        parts, self._parts, self._buffered = self._parts, [], 0
        self._file.write(parts)

    def add_shape(self, name: str, shape: Sequence[int], *, original_name: str | None = None) -> None:
        """Record a tensor's shape in ``shape_payload`` (no tensor record)."""
        self._check_open()
        self._shapes.append(ShapeEntry(name, original_name or name, tuple(int(s) for s in shape)))

    def index(self) -> StepIndex:
        """The index this writer will write."""
        return StepIndex(self.mode, self.mode_step, self.event_file_name, list(self._entries), list(self._shapes))

    def close(self) -> None:
        """Put the events file, then the index file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._entries and self._open_parts is not None:
            try:
                self._drain()
                self._file.commit()
            except BaseException:
                self.abort()
                raise
        elif self._entries:
            # One file, written from the pieces (headers, tensor memory) with writev where the
            # store can: no join, no copy of the step's tensors.
            put_parts(self.store, self.event_file_name, self._parts)
        if self._entries or self._shapes:
            self.index_bytes = self.index().to_json_bytes()
            self.store.put(self.index_file_name, self.index_bytes)
        self._parts = []

    def abort(self) -> None:
        """Give up on the step: nothing of it becomes visible (a streamed temp file is deleted)."""
        self._closed = True
        self._parts = []
        if self._file is not None:
            self._file.abort()
            self._file = None

    def _check_open(self) -> None:
        if self._closed:
            raise SMDebugRuntimeError(f"writer for step {self.step} ({self.worker}) is closed")

    def __enter__(self) -> StepWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def write_float_step(
    store: ObjectStore, step: int, worker: str, mode: ModeKeys, mode_step: int, items: Sequence[tuple[str, float]]
) -> tuple[str, bytes]:
    """What a :class:`StepWriter` writes for ``items`` (Python floats: float64 records of shape
    [1]), in one pass: the events file, then its index. Returns the index key and bytes. A
    writer of many steps keeps a :class:`~murphy.tensorio.float_step.FloatSteps` instead."""
    return FloatSteps(worker).write(store, step, mode, mode_step, items)


def write_collections(store: ObjectStore, doc: CollectionsDoc, worker: str = DEFAULT_WORKER_NAME) -> str:
    """Put ``collections/000000000/<worker>_collections.json``; returns the key."""
    key = collections_file_key(worker)
    store.put(key, doc.to_json_bytes())
    return key


def write_end_of_training(store: ObjectStore) -> None:
    """Put the empty ``training_job_end.ts`` marker."""
    store.put(END_OF_TRAINING_KEY, b"")
