"""A writer process for the hook's steps: encoding and file writes out of the training process.

Why: with a second core the hook's writer thread runs beside training, but it shares the GIL.
Every stretch of Python it runs (encoding a record, framing, the file calls between system
calls) is time the training thread may wait for when it comes back from a torch op, and every
hand-off of the GIL costs a wake-up (benchmarks/writer_thread_share.py). A separate process
shares no GIL. The writer thread stays (queue, order, back-pressure, store calls, manifest,
TensorBoard): for each step it sends the writer process the records as offsets into the shared
arena (murphy.hook.shm_arena) where the staging buffers live, waits for the answer in a
blocking receive (GIL released), and gives the buffers back, as before.

Used for local stores when the hook may use a second core (``MURPHY_HOOK_WRITER_PROCESS=0``
turns it off). If the process cannot start or dies, the writer thread writes that step and all
later ones itself (a WARNING, once): no step is lost. An error the process reports (a full disk)
is a write error, as on the thread.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from murphy.hook.guard import LOGGER_NAME
from murphy.hook.shm_arena import SharedArena

_log = logging.getLogger(LOGGER_NAME)

_BOOT = ("import sys, json; sys.path[:0] = json.loads(sys.argv[1]); "
         "from murphy.hook.writer_child import main; main(sys.argv[2:])")


def process_enabled() -> bool:
    """``MURPHY_HOOK_WRITER_PROCESS`` is not ``0``."""
    return os.environ.get("MURPHY_HOOK_WRITER_PROCESS", "1") != "0"


class ProcessGone(Exception):
    """The writer process could not start or went away; the step is the thread's to write."""


class StepError(Exception):
    """The writer process failed to write a step (the error it reported)."""


class WriterProcess:
    """The parent's handle: :meth:`write` one step at a time, from the writer thread."""

    def __init__(self, arena: SharedArena, root: str, worker: str) -> None:
        self.arena = arena
        self._root = root
        self._worker = worker
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._base = np.frombuffer(arena.mm, dtype=np.uint8).ctypes.data
        self.steps_written = 0

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        """Start the process (it is also started by the first :meth:`write`)."""
        if self._conn is None:
            self._start()

    def _start(self) -> Connection:
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, json.dumps(sys.path), str(theirs.fileno()), str(self.arena.fd),
                 self._root, self._worker],
                pass_fds=(theirs.fileno(), self.arena.fd), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                start_new_session=True,  # the terminal's signals are the script's
            )
        except OSError as exc:
            ours.close()
            raise ProcessGone(f"could not start: {exc}") from exc
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())
        return self._conn

    def write(self, step: int, mode: Any, mode_step: int, records: list[tuple[Any, ...]]) -> tuple[str, bytes | None]:
        """Write one step (records as :meth:`record` builds them); returns the index file's
        name and bytes. Raises ProcessGone (nothing was written that a reader can see: the
        thread writes the step) or StepError."""
        conn = self._conn or self._start()
        try:
            conn.send((step, mode, mode_step, records))
            reply = conn.recv()
        except (EOFError, OSError) as exc:
            self.close()
            raise ProcessGone(f"went away ({exc or type(exc).__name__})") from exc
        if reply[0] != "ok":
            raise StepError(reply[1])
        self.steps_written += 1
        return reply[1], reply[2]

    def record(self, name: str, array: np.ndarray, original_dtype: str | None,
               shape_of: tuple[int, ...] | None) -> tuple[Any, ...]:
        """A record for :meth:`write`: by offset when ``array`` lies in the arena, else whole."""
        addr = array.ctypes.data
        offset = addr - self._base
        if offset >= 0 and offset + array.nbytes <= self.arena.capacity and array.flags.c_contiguous:
            return ("a", name, offset, array.dtype.str, array.shape, original_dtype, shape_of)
        return ("n", name, array, original_dtype, shape_of)

    def close(self) -> None:
        """End the process (it exits when its connection closes) and wait for it briefly."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.send(None)
            conn.close()
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class ProcessStep:
    """One step for the writer process, filled as a :class:`~murphy.tensorio.writer.StepWriter`
    is (``add``/``add_shape``/``close``), so the writer thread encodes records one way for both."""

    def __init__(self, process: WriterProcess, step: int, mode: Any, mode_step: int) -> None:
        self._process = process
        self._step, self._mode, self._mode_step = step, mode, mode_step
        self._records: list[tuple[Any, ...]] = []
        self.index_file_name = ""
        self.index_bytes: bytes | None = None

    def add(self, name: str, array: Any, *, shape_of: tuple[int, ...] | None = None,
            original_dtype: str | None = None, copy: bool = True) -> None:
        """A tensor (an array, by offset where it lies in the arena) or a float metric."""
        if type(array) is float:
            self._records.append(("f", name, array, shape_of))
        else:
            self._records.append(self._process.record(name, array, original_dtype, shape_of))

    def add_shape(self, name: str, shape: tuple[int, ...]) -> None:
        self._records.append(("s", name, shape))

    def close(self) -> None:
        """Send the step and wait for it to be written (ProcessGone, StepError: see write)."""
        self.index_file_name, self.index_bytes = self._process.write(
            self._step, self._mode, self._mode_step, self._records)


def writer_process_for(store: object, worker: str) -> WriterProcess | None:
    """A (not yet started) writer process for ``store``: local stores only, where the platform
    has shared memory files and it is not switched off; None otherwise (the thread writes)."""
    from murphy.hook.shm_arena import arena_possible
    from murphy.storage.local import LocalObjectStore

    if not isinstance(store, LocalObjectStore) or not process_enabled() or not arena_possible():
        return None
    try:
        arena = SharedArena()
    except OSError as exc:
        _log.info("murphy hook: no shared memory for a writer process (%s); the writer thread writes", exc)
        return None
    return WriterProcess(arena, str(store.root), worker)
