"""Reusable host buffers for snapshots (framework-neutral: buffers are opaque objects).

Copying a tensor into a *new* buffer at every saved step costs far more than the copy itself
once the tensor is large: the allocator maps fresh pages for each big buffer and the kernel
zero-fills them on first touch, then unmaps them when the step is written. A backend instead
takes a buffer of the right shape and dtype from this pool (the training thread), copies into
it, and the writer thread gives it back once the step's files are written; the next saved step
copies into warm memory. Free buffers kept are bounded by ``max_bytes`` (beyond it a released
buffer is simply let go), so a model whose tensors change shape cannot grow the pool without
bound.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

DEFAULT_POOL_BYTES = 256 << 20


class StagingPool:
    """Free buffers by key (shape, dtype...): ``take`` on one thread, ``give`` on another."""

    def __init__(self, max_bytes: int = DEFAULT_POOL_BYTES) -> None:
        self.max_bytes = max_bytes
        self._free: dict[Hashable, list[Any]] = {}
        self._free_bytes = 0
        self._lock = threading.Lock()
        #: Buffers handed out that came from the pool (a warm copy) / that had to be allocated.
        self.reused = 0
        self.allocated = 0

    @property
    def free_bytes(self) -> int:
        """Bytes held in free buffers."""
        return self._free_bytes

    def take(self, key: Hashable, nbytes: int, alloc: Callable[[], Any]) -> Any:
        """A free buffer of ``key`` (``nbytes`` each), or a new one from ``alloc()``."""
        with self._lock:
            free = self._free.get(key)
            if free:
                self._free_bytes -= nbytes
                self.reused += 1
                return free.pop()
            self.allocated += 1  # under the lock: the training and copier threads both take
        return alloc()

    def give(self, key: Hashable, nbytes: int, buf: Any) -> None:
        """Return ``buf`` for reuse (dropped instead when the pool is full)."""
        with self._lock:
            if self._free_bytes + nbytes > self.max_bytes:
                return
            self._free.setdefault(key, []).append(buf)
            self._free_bytes += nbytes

    def clear(self) -> None:
        """Let go of every free buffer."""
        with self._lock:
            self._free.clear()
            self._free_bytes = 0
