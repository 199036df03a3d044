"""Inputs of a training container: data channels and the script-mode source tarball.

A channel with ``S3DataDistributionType=ShardedByS3Key`` in a job of N hosts gives each host
about 1/N of its objects, as SageMaker does; murphy's assignment is deterministic (see
:class:`HostShard`): the channel's keys (the objects under an ``S3Prefix``, or a
``ManifestFile``'s entries), relative to the channel and sorted by code point (S3's own listing
order), go round-robin over the hosts in ``resourceconfig.json``'s order: the key at 0-based
position ``i`` is ``algo-<i mod N + 1>``'s. With fewer keys than hosts the last hosts get none
and still run (SageMaker warns against it in its docs and does not refuse it).

A channel in Pipe input mode is not downloaded: :func:`pipe_source` lists what its FIFO carries
(the same keys, the same share of a sharded channel) and :mod:`murphy.container.pipes` streams it.
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import tarfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from murphy.container import manifest
from murphy.container.pipes import PipeSource
from murphy.exceptions import ObjectNotFound
from murphy.storage import ObjectStore, open_store

_CHUNK = 8 << 20
FULLY_REPLICATED = "FullyReplicated"
PIPE = "Pipe"
SHARDED = "ShardedByS3Key"


class InputError(Exception):
    """A channel or source location that cannot be used (becomes the failure message)."""


class Interrupted(Exception):
    """A stop signal arrived while inputs were being fetched."""


@dataclass(frozen=True)
class HostShard:
    """This host's place in the job's cluster, which picks its part of a sharded channel."""

    current_host: str
    hosts: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.current_host not in self.hosts:
            raise InputError(f"current host {self.current_host!r} is not one of the job's hosts {list(self.hosts)}")

    @property
    def index(self) -> int:
        return self.hosts.index(self.current_host)

    def select(self, keys: Iterable[str]) -> list[str]:
        """This host's keys of a channel made of ``keys``: the sorted distinct keys at positions
        ``index``, ``index + N``, ... (so every key is on exactly one host, and the hosts' shares
        differ by at most one key)."""
        return sorted(set(keys))[self.index::len(self.hosts)]

    def describe(self) -> str:
        return f"{SHARDED}: {self.current_host}'s share, 1 in {len(self.hosts)}"


def _shard_of(channel: Mapping[str, Any], host: HostShard | None) -> HostShard | None:
    """The shard a channel is downloaded with (None: every object)."""
    distribution = channel.get("distribution") or FULLY_REPLICATED
    if distribution == FULLY_REPLICATED:
        return None
    if distribution != SHARDED:
        raise InputError(f"S3DataDistributionType {distribution} is not supported (use {FULLY_REPLICATED} or {SHARDED})")
    return host if host is not None and len(host.hosts) > 1 else None  # one host: all of it


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


def _safe(key: str) -> bool:
    """Not an S3 "directory" marker, nor a key that would escape the channel's directory."""
    return not key.endswith("/") and not any(p in ("", ".", "..") for p in key.split("/"))


def download_prefix(uri: str, dest_dir: str, should_stop: Callable[[], bool] = lambda: False,
                    shard: HostShard | None = None) -> int:
    """Every object under ``uri`` (``shard``: this host's share of them) into ``dest_dir``
    (relative paths kept), or the single object ``uri`` names; returns how many. Raises
    :class:`InputError` when there is nothing there."""
    store = open_store(uri)
    keys = [k for k in store.list("") if _safe(k)]
    if keys:
        mine = shard.select(keys) if shard is not None else keys
        for key in mine:
            if should_stop():
                raise Interrupted
            _copy(store, key, os.path.join(dest_dir, *key.split("/")))
        return len(mine)
    parent, name = _split(uri)
    parent_store = open_store(parent)
    try:
        if shard is not None and not shard.select([name]):  # one object: algo-1's
            if not parent_store.exists(name):
                raise ObjectNotFound(name)
            return 0
        _copy(parent_store, name, os.path.join(dest_dir, name))
    except ObjectNotFound:
        raise InputError(f"no objects at {uri}") from None
    return 1


def _manifest_entries(uri: str) -> tuple[str, list[str]]:
    """A ``ManifestFile``'s prefix and its entries (every one checked)."""
    parent, name = _split(uri)
    try:
        m = manifest.parse(open_store(parent).get(name), uri)
    except ObjectNotFound:
        raise InputError(f"manifest {uri} does not exist") from None
    except manifest.ManifestError as e:
        raise InputError(str(e)) from None
    return m.prefix, list(m.entries)


def download_manifest(uri: str, dest_dir: str, should_stop: Callable[[], bool] = lambda: False,
                      shard: HostShard | None = None) -> int:
    """A ``ManifestFile`` channel: ``[{"prefix": P}, "rel/key", ...]``; each ``P + key`` (with
    ``shard``: of this host's share of the entries) is downloaded to ``dest_dir/rel/key``."""
    prefix, entries = _manifest_entries(uri)
    store = open_store(prefix)
    if shard is not None:
        entries = shard.select(entries)
    for rel in entries:
        if should_stop():
            raise Interrupted
        try:
            _copy(store, rel, os.path.join(dest_dir, *rel.split("/")))
        except ObjectNotFound:
            raise InputError(f"manifest {uri}: {prefix.rstrip('/')}/{rel} does not exist") from None
    return len(entries)


def download_channel(channel: Mapping[str, Any], dest_dir: str, should_stop: Callable[[], bool] = lambda: False,
                     host: HostShard | None = None) -> int:
    """``channel`` (a ``murphy.json`` entry) into ``dest_dir``; ``host``: this container's place
    in the job's cluster, which a ``ShardedByS3Key`` channel needs (none: one host)."""
    name, uri = channel["name"], channel["uri"]
    data_type = channel.get("data_type") or "S3Prefix"
    os.makedirs(dest_dir, exist_ok=True)
    try:
        shard = _shard_of(channel, host)
        if data_type == "S3Prefix":
            return download_prefix(uri, dest_dir, should_stop, shard)
        if data_type == "ManifestFile":
            return download_manifest(uri, dest_dir, should_stop, shard)
    except InputError as e:
        raise InputError(f"channel {name!r}: {e}") from None
    raise InputError(f"channel {name!r}: S3DataType {data_type} is not supported by murphy's process runtime")


def _pipe_keys(channel: Mapping[str, Any]) -> tuple[ObjectStore, list[str]]:
    """A Pipe channel's store and every key of it, in the order File mode would list them."""
    uri, data_type = channel["uri"], channel.get("data_type") or "S3Prefix"
    if data_type == "ManifestFile":
        prefix, entries = _manifest_entries(uri)
        return open_store(prefix), entries
    if data_type != "S3Prefix":
        raise InputError(f"S3DataType {data_type} is not supported by murphy's Pipe input mode")
    store = open_store(uri)
    keys = [k for k in store.list("") if _safe(k)]  # listing order: S3's, by key
    if keys:
        return store, keys
    parent, name = _split(uri)
    store = open_store(parent)
    if not store.exists(name):
        raise InputError(f"no objects at {uri}")
    return store, [name]


def pipe_source(channel: Mapping[str, Any], host: HostShard | None = None) -> PipeSource:
    """What a Pipe-mode ``channel``'s FIFO streams (this host's share of a sharded one); the
    listing is taken once, when the job starts, as SageMaker's is. ``ShuffleConfig``: the whole
    channel, shuffled and shared out anew each epoch (:class:`PipeSource`)."""
    name = channel["name"]
    try:
        shard = _shard_of(channel, host)
        store, keys = _pipe_keys(channel)
        wrapper, compression = channel.get("record_wrapper") or "None", channel.get("compression") or "None"
        if wrapper not in ("None", "RecordIO"):
            raise InputError(f"RecordWrapperType {wrapper} is not supported (use None or RecordIO)")
        if compression not in ("None", "Gzip"):
            raise InputError(f"CompressionType {compression} is not supported (use None or Gzip)")
    except InputError as e:
        raise InputError(f"channel {name!r}: {e}") from None
    source = PipeSource(name, store, tuple(keys), record_io=wrapper == "RecordIO", gzip=compression == "Gzip")
    seed = channel.get("shuffle_seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        base = sorted(set(keys)) if shard is not None else keys
        return dataclasses.replace(source, keys=tuple(base), shuffle_seed=seed,
                                   host=shard.index if shard else 0, hosts=len(shard.hosts) if shard else 1)
    return dataclasses.replace(source, keys=tuple(shard.select(keys))) if shard is not None else source


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
