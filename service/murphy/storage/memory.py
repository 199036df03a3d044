"""In-memory store: the fake beside the :class:`ObjectStore` boundary, for unit tests and tooling.

Stores opened with the same ``memory://name`` share one dict, so a hook and a trial in the same
process can talk through it like they would through a directory.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator

from murphy.exceptions import ObjectNotFound
from murphy.storage.base import ObjectStore, join_key

_SHARED: dict[str, _Bucket] = {}
_SHARED_LOCK = threading.Lock()


class _Bucket:
    """A sorted key list plus a dict, so listing from ``start_after`` is a bisect, not a scan."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.data: dict[str, bytes] = {}
        self.keys: list[str] = []


class InMemoryObjectStore:
    """A process-local :class:`ObjectStore`."""

    def __init__(self, name: str = "", prefix: str = "", *, _bucket: _Bucket | None = None) -> None:
        self._name = name
        self._prefix = prefix.strip("/")
        if _bucket is not None:
            self._bucket = _bucket
        elif name:
            with _SHARED_LOCK:
                self._bucket = _SHARED.setdefault(name, _Bucket())
        else:
            self._bucket = _Bucket()

    @property
    def uri(self) -> str:
        return "memory://" + join_key(self._name, self._prefix)

    def _full(self, key: str) -> str:
        return join_key(self._prefix, key)

    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        with self._bucket.lock:
            try:
                data = self._bucket.data[self._full(key)]
            except KeyError:
                raise ObjectNotFound(key) from None
        end = len(data) if length is None else start + length
        return data[start:end]

    def put(self, key: str, data: bytes) -> None:
        full = self._full(key)
        with self._bucket.lock:
            if full not in self._bucket.data:
                bisect.insort(self._bucket.keys, full)
            self._bucket.data[full] = bytes(data)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[str]:
        base = self._prefix + "/" if self._prefix else ""
        full_prefix = base + prefix
        with self._bucket.lock:
            keys = self._bucket.keys
            i = bisect.bisect_left(keys, full_prefix)
            if start_after is not None:
                i = max(i, bisect.bisect_right(keys, base + start_after))
            out: list[str] = []
            while i < len(keys) and keys[i].startswith(full_prefix):
                out.append(keys[i][len(base):])
                i += 1
        return iter(out)

    def exists(self, key: str) -> bool:
        with self._bucket.lock:
            return self._full(key) in self._bucket.data

    def delete(self, key: str) -> None:
        full = self._full(key)
        with self._bucket.lock:
            if self._bucket.data.pop(full, None) is not None:
                i = bisect.bisect_left(self._bucket.keys, full)
                del self._bucket.keys[i]

    def child(self, prefix: str) -> ObjectStore:
        return InMemoryObjectStore(self._name, join_key(self._prefix, prefix), _bucket=self._bucket)
