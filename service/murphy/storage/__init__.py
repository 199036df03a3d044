"""Object stores: the one place murphy touches disk or S3.

``open_store(uri)`` picks the backend: ``s3://bucket/prefix`` → :class:`S3ObjectStore`,
``memory://name`` → :class:`InMemoryObjectStore`, ``file:///path`` or a plain path →
:class:`LocalObjectStore`.

Where ``s3://`` lives is a deployment choice: a real S3 endpoint (boto3's usual configuration,
``AWS_ENDPOINT_URL_S3``, or ``MURPHY_S3_ENDPOINT_URL``), or, when ``MURPHY_S3_LOCAL_ROOT`` is set
(murphy's embedded default), a local directory per bucket: ``s3://b/k`` → ``$MURPHY_S3_LOCAL_ROOT/b/k``.
The control plane passes that variable to every container it starts, so the training process,
the rule evaluators and a person's ``create_trial`` all resolve a URI to the same place.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from murphy.exceptions import StorageError
from murphy.storage.base import ObjectStore, join_key
from murphy.storage.local import LocalObjectStore
from murphy.storage.memory import InMemoryObjectStore

if TYPE_CHECKING:
    from murphy.storage.s3 import S3ObjectStore

#: Environment variable that maps ``s3://bucket/key`` to ``<dir>/bucket/key`` (embedded default).
S3_LOCAL_ROOT_ENV = "MURPHY_S3_LOCAL_ROOT"

__all__ = [
    "S3_LOCAL_ROOT_ENV",
    "InMemoryObjectStore",
    "LocalObjectStore",
    "ObjectStore",
    "S3ObjectStore",
    "is_s3_uri",
    "join_key",
    "local_bucket_store",
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


def local_bucket_store(root: str | os.PathLike[str], uri: str) -> LocalObjectStore:
    """``s3://bucket/key`` as the directory ``<root>/bucket/key`` (murphy's embedded S3 stand-in)."""
    bucket, prefix = split_s3_uri(uri)
    parts = [p for p in prefix.split("/") if p]
    if bucket in (".", "..") or any(p in (".", "..") for p in parts):
        raise StorageError(f"S3 URI may not contain '.' or '..' segments: {uri!r}")
    return LocalObjectStore(os.path.join(os.fspath(root), bucket, *parts))


def open_store(uri: str | os.PathLike[str], *, s3_endpoint_url: str | None = None) -> ObjectStore:
    """Open the store a URI or path names."""
    # A string first: the runtime Protocol check below walks the protocol's members.
    if type(uri) is not str and isinstance(uri, ObjectStore):
        return uri
    if not isinstance(uri, str):
        return LocalObjectStore(os.fspath(uri))
    if is_s3_uri(uri):
        bucket, prefix = split_s3_uri(uri)
        local_root = os.environ.get(S3_LOCAL_ROOT_ENV)
        if local_root and not s3_endpoint_url:
            return local_bucket_store(local_root, uri)
        from murphy.storage.s3 import S3ObjectStore

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


def __getattr__(name: str) -> Any:
    # The S3 backend pulls in http.client and friends (~80 ms): containers that never touch S3
    # (the embedded default) should not pay for it at start-up.
    if name == "S3ObjectStore":
        from murphy.storage.s3 import S3ObjectStore

        return S3ObjectStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
