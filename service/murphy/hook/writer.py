"""The hook's one background writer thread.

The training thread hands over a :class:`StepBatch` (snapshots, not files) and returns; this
thread turns snapshots into numpy arrays, encodes them and writes the step's events file and
index file through :class:`murphy.tensorio.writer.StepWriter`, straight from the snapshots'
memory (no copy: the writer owns them), then gives the snapshots back to the backend
(``release``: the torch backend reuses their buffers for later steps).

Back-pressure: the queue is bounded by steps (``max_pending``) and by bytes of snapshots not
yet written (``max_pending_bytes``; one step larger than that is still taken when nothing else
waits). When it is full the training thread waits for the writer **at most** ``max_block``
seconds (the step's time budget); if there is still no room the whole step is dropped (never a
part of one), counted in :attr:`BackgroundWriter.steps_dropped` and logged as a warning with the
running count (at the 1st, 2nd, 4th, 8th... drop, and once more at close). ``max_block=None``
waits as long as it takes instead (no step is ever dropped). Memory stays bounded either way. A
failed write trips the hook's error guard; from then on the thread only drains the queue, so
the training thread can never block on it.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from murphy.core.modes import ModeKeys
from murphy.hook.backend import TensorBackend
from murphy.hook.guard import LOGGER_NAME, ErrorGuard
from murphy.hook.tensorboard import TensorBoardSink
from murphy.hook.writer_process import ProcessGone, ProcessStep, WriterProcess
from murphy.storage import ObjectStore
from murphy.tensorio.manifest import ManifestWriter, manifest_enabled
from murphy.tensorio.writer import StepWriter

DEFAULT_MAX_PENDING = 16
DEFAULT_MAX_PENDING_BYTES = 256 << 20
#: The longest a training step waits for room in the queue before its step is dropped (seconds).
DEFAULT_MAX_BLOCK = 0.005
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
    nbytes: int = 0


@dataclass
class _Call:
    fn: Callable[[], None]
    where: str


@dataclass
class _Flush:
    done: threading.Event


_STOP = object()


def _batch_bytes(batch: StepBatch) -> int:
    # Snapshots of one tensor object are shared between records of a step: count each once.
    seen: set[int] = set()
    total = 0
    for rec in batch.records:
        snap = rec.snap
        if snap is not None and id(snap) not in seen:
            seen.add(id(snap))
            total += int(getattr(snap, "nbytes", 0) or 0)
    return total


class BackgroundWriter:
    """One daemon thread consuming a bounded queue of steps and store calls, in order."""

    def __init__(
        self,
        store: ObjectStore,
        worker: str,
        backend: TensorBackend,
        guard: ErrorGuard,
        max_pending: int = DEFAULT_MAX_PENDING,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        max_block: float | None = DEFAULT_MAX_BLOCK,
    ) -> None:
        self._store = store
        self._worker = worker
        self._backend = backend
        self._release: Callable[[list[Any]], None] | None = getattr(backend, "release", None)
        self._guard = guard
        self._max_steps = max(1, max_pending)
        self._max_bytes = max(0, max_pending_bytes)
        self._max_block = None if max_block is None else max(0.0, max_block)
        self._items: collections.deque[object] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._pending_steps = 0
        self._pending_bytes = 0
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._warned_full = False
        self._closed = False
        self.steps_written = 0
        #: Packs the index files into step-manifest segments (murphy.tensorio.manifest).
        self.manifest: ManifestWriter | None = ManifestWriter(store, worker) if manifest_enabled() else None
        #: Steps dropped because the queue stayed full for longer than ``max_block``.
        self.steps_dropped = 0
        #: TensorBoard summaries of each written step (murphy.hook.tensorboard), when enabled.
        self.tensorboard: TensorBoardSink | None = None
        #: Encodes and writes the steps out of this process, when set (murphy.hook.writer_process).
        self.process: WriterProcess | None = None

    def submit_step(self, batch: StepBatch) -> None:
        """Queue a step for writing (see the module docs for what happens when the queue is full)."""
        self._put(batch)

    def submit_call(self, fn: Callable[[], None], where: str) -> None:
        """Queue a store operation, run in order with the steps (never dropped)."""
        self._put(_Call(fn, where))

    def flush_manifest(self) -> None:
        """Put the step manifest's last, shorter segment (queued by the hook's ``close``)."""
        if self.manifest is not None:
            self.manifest.flush()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far is written (or dropped after an error)."""
        if self._thread is None or self._closed:
            # Closed: close() flushed everything and the thread is gone, so nothing would ever
            # answer a flush queued now (hook.flush() after training ended used to hang).
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
            self._enqueue(_STOP)
            thread.join(timeout)
        if self.process is not None:
            self.process.close()
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.steps_dropped:
            _log.warning("murphy hook: %d saved steps were dropped in all because the store was slower "
                         "than training (%d written)", self.steps_dropped, self.steps_written)

    def _put(self, item: object, force: bool = False) -> None:
        if self._closed and not force:
            return
        self._ensure_started()
        if not isinstance(item, StepBatch):
            self._enqueue(item)  # calls and flushes are tiny: never held back
            return
        item.nbytes = _batch_bytes(item)
        with self._cond:
            if self._is_full(item.nbytes):
                self._warn_full()
                if not self._wait_for_room(item.nbytes):
                    self.steps_dropped += 1
                    dropped = self.steps_dropped
                else:
                    dropped = 0
            else:
                dropped = 0
            if not dropped:
                self._pending_steps += 1
                self._pending_bytes += item.nbytes
                self._items.append(item)
                self._cond.notify_all()
        if dropped:
            if dropped & (dropped - 1) == 0:  # 1, 2, 4, 8...: counted, without flooding the log
                _log.warning("murphy hook: step %d dropped (%d so far): the writer is more than %d steps / "
                             "%d MiB behind and the step's wait budget (%.1f ms) ran out",
                             item.step, dropped, self._max_steps, self._max_bytes >> 20,
                             1e3 * (self._max_block or 0.0))
            self._give_back(item)

    def _is_full(self, nbytes: int) -> bool:
        if self._pending_steps >= self._max_steps:
            return True
        return self._pending_steps > 0 and self._pending_bytes + nbytes > self._max_bytes

    def _wait_for_room(self, nbytes: int) -> bool:
        """Wait (the condition held) until the step fits or the budget runs out."""
        if self._max_block is None:
            while self._is_full(nbytes):
                self._cond.wait()
            return True
        deadline = time.monotonic() + self._max_block
        while self._is_full(nbytes):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._cond.wait(left)
        return True

    def _warn_full(self) -> None:
        if not self._warned_full:
            self._warned_full = True
            policy = ("training waits for the writer" if self._max_block is None else
                      f"training waits at most {1e3 * self._max_block:.1f} ms per step, then the step is dropped")
            _log.warning("murphy hook: %d steps (%d MiB) are waiting to be written; %s (the store is slower "
                         "than the steps being saved)", self._pending_steps, self._pending_bytes >> 20, policy)

    def _enqueue(self, item: object) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()

    def _ensure_started(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="murphy-hook-writer", daemon=True)
                thread.start()
                self._thread = thread

    def _run(self) -> None:
        cond, items = self._cond, self._items
        while True:
            with cond:
                while not items:
                    cond.wait()
                item = items.popleft()
            if item is _STOP:
                return
            if isinstance(item, _Flush):
                item.done.set()
                continue
            try:
                if not self._guard.disabled:
                    self._handle(item)
            finally:
                if isinstance(item, StepBatch):
                    with cond:
                        self._pending_steps -= 1
                        self._pending_bytes -= item.nbytes
                        cond.notify_all()

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
        finally:
            if isinstance(item, StepBatch):
                self._give_back(item)

    def _give_back(self, batch: StepBatch) -> None:
        """Hand the step's snapshots back to the backend (their buffers may be reused)."""
        release = self._release
        if release is None:  # nothing to give back to (numpy and XGBoost snapshots)
            batch.records = []
            return
        snaps = [rec.snap for rec in batch.records if rec.snap is not None]
        batch.records = []
        if snaps:
            try:
                release(snaps)
            except Exception as exc:
                self._guard.trip(exc, "writer (release)")

    def use_process(self, process: WriterProcess) -> None:
        """Write the steps through ``process`` (murphy.hook.writer_process) from now on; it is
        started now, so that its imports overlap the script's own set-up, not its first step."""
        self.process = process
        try:
            process.start()
        except ProcessGone as exc:
            self.process = None
            _log.warning("murphy hook: the writer process %s; the writer thread writes the steps", exc)

    def _write_step(self, batch: StepBatch) -> None:
        if batch.fence is not None:
            batch.fence()
        if self.manifest is not None:
            self.manifest.begin()
        process = self.process
        if process is not None:
            sent = ProcessStep(process, batch.step, batch.mode, batch.mode_step)
            arrays = self._encode(batch, sent)
            try:
                sent.close()
            except ProcessGone as exc:
                self.process = None
                _log.warning("murphy hook: the writer process %s; this step and the later ones are written by "
                             "the writer thread", exc)
            else:
                self._written(batch, sent.index_file_name, sent.index_bytes, arrays)
                return
        # stream: records reach the file as they are encoded (short GIL holds, see StepWriter).
        writer = StepWriter(self._store, batch.step, self._worker, batch.mode, batch.mode_step, stream=True)
        try:
            arrays = self._encode(batch, writer)
        except BaseException:
            writer.abort()
            raise
        writer.close()
        self._written(batch, writer.index_file_name, writer.index_bytes, arrays)

    def _encode(self, batch: StepBatch, writer: StepWriter | ProcessStep) -> list[tuple[str, Any]] | None:
        """Add the step's records to ``writer``; the arrays for TensorBoard when it is on."""
        # The step's arrays are kept for TensorBoard only when it is on (no list otherwise).
        arrays: list[tuple[str, Any]] | None = [] if self.tensorboard is not None else None
        to_numpy, add = self._backend.to_numpy, writer.add
        for rec in batch.records:
            snap = rec.snap
            if type(snap) is float:
                # A Python float (immutable, so its own snapshot): written as smdebug's
                # make_numpy_array writes it, float64 of shape [1], without building the array.
                add(rec.name, snap, shape_of=rec.shape)
                if arrays is not None:
                    arrays.append((rec.name, np.array([snap])))
                continue
            if snap is None:
                writer.add_shape(rec.name, rec.shape or ())
                continue
            array, original_dtype = to_numpy(snap)
            if array is None:
                continue  # invalidated by the backend's fence (counted and logged there)
            # copy=False: the snapshot is this thread's until _give_back, after the files.
            add(rec.name, array, original_dtype=original_dtype, shape_of=rec.shape, copy=False)
            if arrays is not None:
                arrays.append((rec.name, array))
        return arrays

    def _written(self, batch: StepBatch, index_name: str, index_bytes: bytes | None,
                 arrays: list[tuple[str, Any]] | None) -> None:
        self.steps_written += 1
        if self.manifest is not None and index_bytes is not None:
            self.manifest.add(index_name, batch.step, index_bytes)
        if self.tensorboard is not None and arrays is not None:
            self.tensorboard.write_step(batch.step, batch.mode, arrays)
