"""Memory that the training process and its writer process both map (Linux ``memfd``).

The PyTorch hook's staging buffers (murphy.hook.staging) are carved out of this arena when the
hook writes through a writer process (murphy.hook.writer_process): the snapshot copies land in
memory the writer process reads directly, so a step crosses the process boundary as a few
offsets, not as its bytes.

Buffers are handed out by a bump allocator and never freed: the staging pool reuses them step
after step, so the arena only grows to the pool's working set. Pages are reserved with
``posix_fallocate`` before a buffer is handed out, in chunks: writing to a shared-memory page
that cannot be backed would kill the process with SIGBUS, so an arena that cannot grow says so
(``alloc`` returns None) and the caller allocates ordinary memory instead.
"""

from __future__ import annotations

import mmap
import os
import threading

#: Upper bound of an arena (its pages are reserved only as buffers are handed out).
DEFAULT_ARENA_BYTES = 512 << 20
#: Pages are reserved this many bytes at a time.
RESERVE_CHUNK = 16 << 20
ALIGN = 64


def arena_possible() -> bool:
    """Whether this platform has anonymous shared memory files (Linux ``memfd_create``)."""
    return hasattr(os, "memfd_create")


class SharedArena:
    """A ``memfd`` of ``capacity`` bytes mapped here; :attr:`fd` is passed to the writer process."""

    def __init__(self, capacity: int = DEFAULT_ARENA_BYTES) -> None:
        self.capacity = capacity
        self.fd = os.memfd_create("murphy-hook-arena", 0)
        try:
            os.ftruncate(self.fd, capacity)
            self.mm = mmap.mmap(self.fd, capacity)
        except BaseException:
            os.close(self.fd)
            raise
        self._top = 0
        self._reserved = 0
        self._lock = threading.Lock()

    def alloc(self, nbytes: int) -> int | None:
        """The offset of ``nbytes`` of fresh, backed memory; None when the arena cannot give it."""
        if nbytes <= 0:
            return None
        with self._lock:
            start = -(-self._top // ALIGN) * ALIGN
            end = start + nbytes
            if end > self.capacity:
                return None
            if end > self._reserved:
                grow_to = min(self.capacity, max(end, self._reserved + RESERVE_CHUNK))
                try:
                    os.posix_fallocate(self.fd, self._reserved, grow_to - self._reserved)
                except OSError:
                    return None
                self._reserved = grow_to
            self._top = end
            return start

    @property
    def used(self) -> int:
        """Bytes handed out so far."""
        return self._top
