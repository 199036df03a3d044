"""A store that records what is asked of it: the fake beside :class:`ObjectStore` for tests that
count requests (how many GETs opening a trial costs) or check their order (events before index).

It wraps another store and passes every call through. Not being a local or in-memory store
itself, it is read the way remote stores are (concurrent fetches, the step manifest), which is
what a request-counting test wants to see.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

from murphy.storage.base import ObjectStore


class RecordingObjectStore:
    """An :class:`ObjectStore` over ``inner`` that records calls.

    ``calls`` counts requests by method name (``get``, ``list``, ``exists``, ``put``, ``delete``),
    ``gets`` holds each get's ``(key, start, length)`` and ``puts`` the put keys, in order. A
    :meth:`child` records into the same counters.
    """

    def __init__(self, inner: ObjectStore, *, uri_scheme: str = "recording") -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.gets: list[tuple[str, int, int | None]] = []
        self.puts: list[str] = []
        self._scheme = uri_scheme
        self._lock = threading.Lock()  # readers fetch from several threads

    @property
    def uri(self) -> str:
        return f"{self._scheme}://{self.inner.uri}"

    def clear(self) -> None:
        """Forget what was recorded so far."""
        with self._lock:
            self.calls.clear()
            self.gets.clear()
            self.puts.clear()

    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        with self._lock:
            self.calls["get"] += 1
            self.gets.append((key, start, length))
        return self.inner.get(key, start, length)

    def put(self, key: str, data: bytes) -> None:
        with self._lock:
            self.calls["put"] += 1
            self.puts.append(key)
        self.inner.put(key, data)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[str]:
        with self._lock:
            self.calls["list"] += 1
        return self.inner.list(prefix, start_after)

    def exists(self, key: str) -> bool:
        with self._lock:
            self.calls["exists"] += 1
        return self.inner.exists(key)

    def delete(self, key: str) -> None:
        with self._lock:
            self.calls["delete"] += 1
        self.inner.delete(key)

    def child(self, prefix: str) -> ObjectStore:
        sub = RecordingObjectStore(self.inner.child(prefix), uri_scheme=self._scheme)
        sub.calls, sub.gets, sub.puts, sub._lock = self.calls, self.gets, self.puts, self._lock
        return sub
