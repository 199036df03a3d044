"""Object stores: the one place murphy touches disk or S3.

``open_store(uri)`` picks the backend: ``s3://bucket/prefix`` → :class:`S3ObjectStore`,
``memory://name`` → :class:`InMemoryObjectStore`, ``file:///path`` or a plain path →
:class:`LocalObjectStore`.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

from murphy.exceptions import StorageError
from murphy.storage.base import ObjectStore, join_key
from murphy.storage.local import LocalObjectStore
from murphy.storage.memory import InMemoryObjectStore
from murphy.storage.s3 import S3ObjectStore

__all__ = [
    "InMemoryObjectStore",
    "LocalObjectStore",
    "ObjectStore",
    "S3ObjectStore",
    "is_s3_uri",
    "join_key",
    "open_store",
    "split_s3_uri",
]


def is_s3_uri(uri: str | os.PathLike[str]) -> bool:
    return isinstance(uri, str) and uri.startswith("s3://")


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` → ``("bucket", "a/b")``."""
    if not is_s3_uri(uri):
        raise StorageError(f"not an S3 URI: {uri!r}")
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    if not bucket:
        raise StorageError(f"S3 URI has no bucket: {uri!r}")
    return bucket, prefix.strip("/")


def open_store(uri: str | os.PathLike[str], *, s3_endpoint_url: str | None = None) -> ObjectStore:
    """Open the store a URI or path names."""
    if isinstance(uri, ObjectStore):
        return uri
    if not isinstance(uri, str):
        return LocalObjectStore(os.fspath(uri))
    if is_s3_uri(uri):
        bucket, prefix = split_s3_uri(uri)
        return S3ObjectStore(bucket, prefix, endpoint_url=s3_endpoint_url)
    if uri.startswith("memory://"):
        name, _, prefix = uri[len("memory://"):].partition("/")
        return InMemoryObjectStore(name or "default", prefix)
    if uri.startswith("file://"):
        parsed = urlparse(uri)
        if parsed.netloc not in ("", "localhost"):
            raise StorageError(f"file URI must be local: {uri!r}")
        return LocalObjectStore(unquote(parsed.path))
    if "://" in uri:
        raise StorageError(f"unsupported store URI scheme: {uri!r} (use a path, file://, s3:// or memory://)")
    return LocalObjectStore(uri)
