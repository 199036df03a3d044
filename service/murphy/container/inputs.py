"""Inputs of a training container: data channels and the script-mode source tarball."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlparse

from murphy.exceptions import ObjectNotFound
from murphy.storage import ObjectStore, open_store

_CHUNK = 8 << 20


class InputError(Exception):
    """A channel or source location that cannot be used (becomes the failure message)."""


class Interrupted(Exception):
    """A stop signal arrived while inputs were being fetched."""


def _split(uri: str) -> tuple[str, str]:
    """``(parent URI, last segment)`` of an object URI."""
    head, _, name = uri.rstrip("/").rpartition("/")
    if not name or head.endswith(":/") or head.endswith(":"):
        raise InputError(f"{uri!r} does not name an object")
    return head, name


def _copy(store: ObjectStore, key: str, dest: str) -> int:
    chunk = store.get(key, 0, _CHUNK)  # first, so a missing object leaves no empty file behind
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    size = 0
    with open(dest, "wb") as f:
        while True:
            f.write(chunk)
            size += len(chunk)
            if len(chunk) < _CHUNK:
                return size
            chunk = store.get(key, size, _CHUNK)


def download_prefix(uri: str, dest_dir: str, should_stop: Callable[[], bool] = lambda: False) -> int:
    """Every object under ``uri`` into ``dest_dir`` (relative paths kept), or the single object
    ``uri`` names; returns how many. Raises :class:`InputError` when there is nothing there."""
    store = open_store(uri)
    count = 0
    for key in store.list(""):
        if should_stop():
            raise Interrupted
        parts = key.split("/")
        if key.endswith("/") or any(p in ("", ".", "..") for p in parts):
            continue  # S3 "directory" markers and keys that would escape dest_dir
        _copy(store, key, os.path.join(dest_dir, *parts))
        count += 1
    if count:
        return count
    parent, name = _split(uri)
    parent_store = open_store(parent)
    try:
        _copy(parent_store, name, os.path.join(dest_dir, name))
    except ObjectNotFound:
        raise InputError(f"no objects at {uri}") from None
    return 1


def download_manifest(uri: str, dest_dir: str, should_stop: Callable[[], bool] = lambda: False) -> int:
    """A ``ManifestFile`` channel: ``[{"prefix": P}, "rel/key", ...]``; each ``P + key`` is
    downloaded to ``dest_dir/rel/key``."""
    parent, name = _split(uri)
    try:
        doc = json.loads(open_store(parent).get(name))
    except ObjectNotFound:
        raise InputError(f"manifest {uri} does not exist") from None
    except ValueError as e:
        raise InputError(f"manifest {uri} is not valid JSON: {e}") from None
    if not (isinstance(doc, list) and doc and isinstance(doc[0], Mapping) and isinstance(doc[0].get("prefix"), str)):
        raise InputError(f'manifest {uri} must be a JSON list starting with {{"prefix": "s3://..."}}')
    prefix = doc[0]["prefix"]
    store = open_store(prefix)
    for rel in doc[1:]:
        if should_stop():
            raise Interrupted
        if not isinstance(rel, str) or any(p in ("", ".", "..") for p in rel.split("/")):
            raise InputError(f"manifest {uri}: bad entry {rel!r}")
        try:
            _copy(store, rel, os.path.join(dest_dir, *rel.split("/")))
        except ObjectNotFound:
            raise InputError(f"manifest {uri}: {prefix.rstrip('/')}/{rel} does not exist") from None
    return len(doc) - 1


def download_channel(channel: Mapping[str, Any], dest_dir: str, should_stop: Callable[[], bool] = lambda: False) -> int:
    name, uri = channel["name"], channel["uri"]
    data_type = channel.get("data_type") or "S3Prefix"
    os.makedirs(dest_dir, exist_ok=True)
    try:
        if data_type == "S3Prefix":
            return download_prefix(uri, dest_dir, should_stop)
        if data_type == "ManifestFile":
            return download_manifest(uri, dest_dir, should_stop)
    except InputError as e:
        raise InputError(f"channel {name!r}: {e}") from None
    raise InputError(f"channel {name!r}: S3DataType {data_type} is not supported by murphy's process runtime")


def _local_dir(uri: str) -> str | None:
    """The directory a ``file://`` URI or path names, if it is one."""
    if uri.startswith("file://"):
        path = unquote(urlparse(uri).path)
    elif "://" in uri:
        return None
    else:
        path = uri
    return path if os.path.isdir(path) else None


def fetch_source(uri: str, code_dir: str) -> None:
    """``sagemaker_submit_directory``: a ``.tar.gz`` (``s3://``, ``file://``, path) extracted
    into ``code_dir``, or a local directory copied there."""
    os.makedirs(code_dir, exist_ok=True)
    local = _local_dir(uri)
    if local is not None:
        shutil.copytree(local, code_dir, dirs_exist_ok=True)
        return
    parent, name = _split(uri)
    try:
        data = open_store(parent).get(name)
    except ObjectNotFound:
        raise InputError(f"sagemaker_submit_directory {uri} does not exist") from None
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            _extract(tar, code_dir)
    except (tarfile.TarError, OSError) as e:
        raise InputError(f"sagemaker_submit_directory {uri} is not a usable tar archive: {e}") from None


def _extract(tar: tarfile.TarFile, dest: str) -> None:
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    # Pythons without extraction filters: refuse what the "data" filter would refuse.
    root = os.path.realpath(dest)
    for member in tar.getmembers():
        target = os.path.realpath(os.path.join(dest, member.name))
        if not (target == root or target.startswith(root + os.sep)) or member.isdev():
            raise tarfile.TarError(f"refusing to extract {member.name!r}")
        if (member.issym() or member.islnk()) and os.path.isabs(member.linkname):
            raise tarfile.TarError(f"refusing to extract link {member.name!r} -> {member.linkname!r}")
    tar.extractall(dest)


def pack_dir(src_dir: str) -> bytes:
    """``src_dir``'s content as a ``.tar.gz`` (paths relative to it), as SageMaker packs
    ``model.tar.gz`` and ``output.tar.gz``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        if os.path.isdir(src_dir):
            for entry in sorted(os.listdir(src_dir)):
                tar.add(os.path.join(src_dir, entry), arcname=entry)
    return buf.getvalue()
