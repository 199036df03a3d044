"""A store slower than training: the fake beside :class:`ObjectStore` for back-pressure tests.

Wraps another store and holds each ``put`` for ``per_put`` seconds plus ``len(data) /
bytes_per_second`` (a slow or throttled disk, a distant bucket), recording the keys in the order
they became visible, and how many puts were in flight at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from murphy.storage.base import ObjectStore


class SlowObjectStore:
    """An :class:`ObjectStore` whose puts take time; everything else goes straight to ``inner``."""

    def __init__(self, inner: ObjectStore, per_put: float = 0.0, bytes_per_second: float | None = None) -> None:
        self.inner = inner
        self.per_put = per_put
        self.bytes_per_second = bytes_per_second
        self.puts: list[str] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()

    @property
    def uri(self) -> str:
        return self.inner.uri

    def put(self, key: str, data: bytes) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            delay = self.per_put + (len(data) / self.bytes_per_second if self.bytes_per_second else 0.0)
            time.sleep(delay)
            self.inner.put(key, data)
            with self._lock:
                self.puts.append(key)
        finally:
            with self._lock:
                self._in_flight -= 1

    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        return self.inner.get(key, start, length)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[str]:
        return self.inner.list(prefix, start_after)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def child(self, prefix: str) -> ObjectStore:
        return SlowObjectStore(self.inner.child(prefix), self.per_put, self.bytes_per_second)
