"""The object-store boundary: everything murphy reads or writes goes through :class:`ObjectStore`.

Keys are ``/``-separated strings relative to the store's root (the trial root or the hook's
``out_dir``). Lexical key order is the contract the tensor layout relies on: zero-padded step
numbers make ``list(prefix, start_after=...)`` return new steps only, in step order, on every
backend (this is what S3's ``StartAfter`` gives for free).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

Buffer = bytes | bytearray | memoryview


@runtime_checkable
class ObjectStore(Protocol):
    """A flat key → bytes store with atomic puts and lexically ordered listing."""

    @property
    def uri(self) -> str:
        """The URI this store was opened from (``file:///...``, ``s3://bucket/prefix``, ``memory://name``)."""
        ...

    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        """Return ``length`` bytes of ``key`` from ``start`` (all of the rest when ``length`` is None).

        Raises :class:`murphy.exceptions.ObjectNotFound` if the key does not exist. A range
        that runs past the end returns what exists (possibly fewer bytes than asked).
        """
        ...

    def put(self, key: str, data: bytes) -> None:
        """Write ``data`` to ``key`` atomically: readers see the old object, or all of the new one."""
        ...

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[str]:
        """Yield the keys that start with ``prefix`` and sort after ``start_after``, in lexical order."""
        ...

    def exists(self, key: str) -> bool:
        """True if ``key`` is an object in the store."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key``; removing a missing key is not an error."""
        ...

    def child(self, prefix: str) -> ObjectStore:
        """A store rooted at ``prefix`` inside this one (same backend, same connection)."""
        ...


def join_key(*parts: str) -> str:
    """Join key parts with single slashes, ignoring empty parts."""
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def put_parts(store: ObjectStore, key: str, parts: Sequence[Buffer]) -> None:
    """``store.put(key, b"".join(parts))``, without the join where the store can write pieces.

    A store may offer ``put_parts(key, parts)`` with ``put``'s atomicity (the local store writes
    them with ``writev``); the others get the joined bytes.
    """
    fn = getattr(store, "put_parts", None)
    if fn is not None:
        fn(key, parts)
    else:
        store.put(key, b"".join(parts))
