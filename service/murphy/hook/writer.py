"""The hook's one background writer thread.

The training thread hands over a :class:`StepBatch` (snapshots, not files) and returns; this
thread turns snapshots into numpy arrays, encodes them and writes the step's events file and
index file through :class:`murphy.tensorio.writer.StepWriter`.

Back-pressure, not dropping: the queue is bounded (``max_pending`` steps). When it is full the
training thread waits for the writer (a warning is logged the first time), so no saved step is
ever lost silently and memory stays bounded. A failed write trips the hook's error guard; from
then on the thread only drains the queue, so the training thread can never block on it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from murphy.core.modes import ModeKeys
from murphy.hook.backend import TensorBackend
from murphy.hook.guard import LOGGER_NAME, ErrorGuard
from murphy.hook.tensorboard import TensorBoardSink
from murphy.storage import ObjectStore
from murphy.tensorio.manifest import ManifestWriter, manifest_enabled
from murphy.tensorio.writer import StepWriter

DEFAULT_MAX_PENDING = 16
_log = logging.getLogger(LOGGER_NAME)


@dataclass
class Record:
    """One tensor to write: ``snap`` is a backend snapshot (None when only the shape is saved)."""

    name: str
    snap: Any
    shape: tuple[int, ...] | None = None


@dataclass
class StepBatch:
    """Everything saved at one step by one worker."""

    step: int
    mode: ModeKeys
    mode_step: int
    records: list[Record] = field(default_factory=list)
    fence: Callable[[], None] | None = None


@dataclass
class _Call:
    fn: Callable[[], None]
    where: str


@dataclass
class _Flush:
    done: threading.Event


_STOP = object()


class BackgroundWriter:
    """One daemon thread consuming a bounded queue of steps and store calls, in order."""

    def __init__(
        self,
        store: ObjectStore,
        worker: str,
        backend: TensorBackend,
        guard: ErrorGuard,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> None:
        self._store = store
        self._worker = worker
        self._backend = backend
        self._guard = guard
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max(1, max_pending))
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._warned_full = False
        self._closed = False
        self.steps_written = 0
        #: Packs the index files into step-manifest segments (murphy.tensorio.manifest).
        self.manifest: ManifestWriter | None = ManifestWriter(store, worker) if manifest_enabled() else None
        #: TensorBoard summaries of each written step (murphy.hook.tensorboard), when enabled.
        self.tensorboard: TensorBoardSink | None = None

    def submit_step(self, batch: StepBatch) -> None:
        """Queue a step for writing (waits while ``max_pending`` steps are queued)."""
        self._put(batch)

    def submit_call(self, fn: Callable[[], None], where: str) -> None:
        """Queue a store operation, run in order with the steps."""
        self._put(_Call(fn, where))

    def flush_manifest(self) -> None:
        """Put the step manifest's last, shorter segment (queued by the hook's ``close``)."""
        if self.manifest is not None:
            self.manifest.flush()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far is written (or dropped after an error)."""
        if self._thread is None:
            return True
        done = threading.Event()
        self._put(_Flush(done), force=True)
        return done.wait(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Flush, then stop the thread. Later submissions are ignored."""
        if self._closed:
            return
        self.flush(timeout)
        self._closed = True
        thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(timeout)
        if self.tensorboard is not None:
            self.tensorboard.close()

    def _put(self, item: object, force: bool = False) -> None:
        if self._closed and not force:
            return
        self._ensure_started()
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            if not self._warned_full:
                self._warned_full = True
                _log.warning(
                    "murphy hook: %d steps are waiting to be written; training waits for the "
                    "writer (the store is slower than the steps being saved)",
                    self._queue.maxsize,
                )
            self._queue.put(item)

    def _ensure_started(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="murphy-hook-writer", daemon=True)
                thread.start()
                self._thread = thread

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if isinstance(item, _Flush):
                item.done.set()
            elif not self._guard.disabled:
                self._handle(item)

    def _handle(self, item: object) -> None:
        try:
            if isinstance(item, StepBatch):
                self._write_step(item)
            elif isinstance(item, _Call):
                item.fn()
        except Exception as exc:
            where = f"writer (step {item.step})" if isinstance(item, StepBatch) else "writer"
            if isinstance(item, _Call):
                where = f"writer ({item.where})"
            self._guard.trip(exc, where)

    def _write_step(self, batch: StepBatch) -> None:
        if batch.fence is not None:
            batch.fence()
        if self.manifest is not None:
            self.manifest.begin()
        writer = StepWriter(self._store, batch.step, self._worker, batch.mode, batch.mode_step)
        # The step's arrays are kept for TensorBoard only when it is on (no list otherwise).
        arrays: list[tuple[str, Any]] | None = [] if self.tensorboard is not None else None
        for rec in batch.records:
            if rec.snap is None:
                writer.add_shape(rec.name, rec.shape or ())
                continue
            array, original_dtype = self._backend.to_numpy(rec.snap)
            writer.add(rec.name, array, original_dtype=original_dtype, shape_of=rec.shape)
            if arrays is not None:
                arrays.append((rec.name, array))
        writer.close()
        self.steps_written += 1
        if self.manifest is not None and writer.index_bytes is not None:
            self.manifest.add(writer.index_file_name, batch.step, writer.index_bytes)
        if self.tensorboard is not None and arrays is not None:
            self.tensorboard.write_step(batch.step, batch.mode, arrays)
