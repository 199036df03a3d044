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
from typing import NamedTuple

from murphy.storage.base import ObjectStore


class Call(NamedTuple):
    """One request made of a :class:`RecordingObjectStore`: the method and its arguments.

    ``get``: ``(key, start, length)``; ``put``: ``(key, len(data))`` (the size, not the bytes:
    a test asks what was written where, and keeping every payload would double the memory);
    ``list``: ``(prefix, start_after)``; ``exists`` and ``delete``: ``(key,)``.
    """

    op: str
    args: tuple[object, ...]


class RecordingObjectStore:
    """An :class:`ObjectStore` over ``inner`` that records calls.

    ``calls`` counts requests by method name (``get``, ``list``, ``exists``, ``put``, ``delete``),
    ``log`` holds every request with its arguments (:class:`Call`), ``gets`` each get's ``(key,
    start, length)`` and ``puts`` the put keys, all in order. A :meth:`child` records into the
    same lists and counters (its keys relative to the child, as it is asked them).
    """

    def __init__(self, inner: ObjectStore, *, uri_scheme: str = "recording") -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.log: list[Call] = []
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
            self.log.clear()
            self.gets.clear()
            self.puts.clear()

    def _record(self, op: str, *args: object) -> None:
        # The caller holds self._lock (readers record from several threads).
        self.calls[op] += 1
        self.log.append(Call(op, args))

    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        with self._lock:
            self._record("get", key, start, length)
            self.gets.append((key, start, length))
        return self.inner.get(key, start, length)

    def put(self, key: str, data: bytes) -> None:
        with self._lock:
            self._record("put", key, len(data))
            self.puts.append(key)
        self.inner.put(key, data)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[str]:
        with self._lock:
            self._record("list", prefix, start_after)
        return self.inner.list(prefix, start_after)

    def exists(self, key: str) -> bool:
        with self._lock:
            self._record("exists", key)
        return self.inner.exists(key)

    def delete(self, key: str) -> None:
        with self._lock:
            self._record("delete", key)
        self.inner.delete(key)

    def child(self, prefix: str) -> ObjectStore:
        sub = RecordingObjectStore(self.inner.child(prefix), uri_scheme=self._scheme)
        sub.calls, sub.log, sub.gets, sub.puts, sub._lock = self.calls, self.log, self.gets, self.puts, self._lock
        return sub
