"""The writer process's side (murphy.hook.writer_process): encode and write the steps it is sent.

Started by the hook's writer thread as ``python -c`` with the parent's ``sys.path``; it imports no
framework, only the format's writer and numpy. It reads a step's tensors straight from the
shared arena (murphy.hook.shm_arena) at the offsets it is sent, writes the step's events and
index files through :class:`murphy.tensorio.writer.StepWriter` (the same bytes as the thread
writer), and answers with the index file's name and bytes, or the error. It exits when the
parent closes the connection (also when the parent dies).
"""

from __future__ import annotations

import mmap
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from murphy.storage.local import LocalObjectStore
from murphy.tensorio.writer import StepWriter


def write_step(store: LocalObjectStore, mm: mmap.mmap, worker: str, msg: tuple[Any, ...]) -> tuple[str, bytes | None]:
    """Write one step message; returns (index file name, its bytes)."""
    step, mode, mode_step, records = msg
    writer = StepWriter(store, step, worker, mode, mode_step, stream=True)
    try:
        for rec in records:
            kind, name = rec[0], rec[1]
            if kind == "a":  # in the arena: (offset, dtype, shape, original dtype, shape_of)
                _, _, offset, dtype, shape, original, shape_of = rec
                dt = np.dtype(dtype)
                count = int(np.prod(shape, dtype=np.int64)) if shape else 1
                array = np.frombuffer(mm, dtype=dt, count=count, offset=offset).reshape(shape)
                writer.add(name, array, original_dtype=original, shape_of=shape_of, copy=False)
            elif kind == "n":  # an array sent whole (not in the arena)
                _, _, array, original, shape_of = rec
                writer.add(name, array, original_dtype=original, shape_of=shape_of, copy=False)
            elif kind == "f":  # a Python float metric
                writer.add(name, rec[2], shape_of=rec[3])
            else:  # "s": the shape only
                writer.add_shape(name, rec[2])
    except BaseException:
        writer.abort()
        raise
    writer.close()
    return writer.index_file_name, writer.index_bytes


def main(argv: list[str]) -> None:
    """``argv``: connection fd, arena fd, the store's root, the worker name."""
    # The training script's Ctrl-C is for it: this process ends when the parent goes.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn_fd, arena_fd, root, worker = int(argv[0]), int(argv[1]), argv[2], argv[3]
    conn = Connection(conn_fd)
    mm = mmap.mmap(arena_fd, 0)
    store = LocalObjectStore(root)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        try:
            reply: tuple[Any, ...] = ("ok", *write_step(store, mm, worker, msg))
        except Exception as exc:
            reply = ("error", f"{type(exc).__name__}: {exc}")
        conn.send(reply)


if __name__ == "__main__":  # pragma: no cover - started through writer_process's bootstrap
    main(sys.argv[1:])
