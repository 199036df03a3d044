"""ONE contract suite for every ObjectStore: local directory, in-memory, moto's server, SeaweedFS."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from murphy.exceptions import ObjectNotFound, StorageError
from murphy.storage import (
    InMemoryObjectStore,
    LocalObjectStore,
    ObjectStore,
    S3ObjectStore,
    open_store,
)

BACKENDS = ["local", "memory", "moto", "seaweedfs"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    kind = request.param
    if kind == "local":
        return LocalObjectStore(tmp_path / "root")
    if kind == "memory":
        return InMemoryObjectStore(f"contract-{id(tmp_path)}", "base")
    import servers

    server = request.getfixturevalue(f"{kind}_server")
    bucket = servers.new_bucket(server)
    return S3ObjectStore(bucket, "some/prefix", client=server.client())


def test_put_get_roundtrip(store: ObjectStore) -> None:
    store.put("a/b.bin", b"\x00\x01hello")
    assert store.get("a/b.bin") == b"\x00\x01hello"
    assert store.exists("a/b.bin")
    assert not store.exists("a/c.bin")
    assert not store.exists("a")


def test_put_overwrites(store: ObjectStore) -> None:
    store.put("k", b"old")
    store.put("k", b"new!")
    assert store.get("k") == b"new!"


def test_empty_object(store: ObjectStore) -> None:
    store.put("training_job_end.ts", b"")
    assert store.exists("training_job_end.ts")
    assert store.get("training_job_end.ts") == b""


def test_byte_ranges(store: ObjectStore) -> None:
    store.put("r", b"0123456789")
    assert store.get("r", 2, 3) == b"234"
    assert store.get("r", 0, 10) == b"0123456789"
    assert store.get("r", 7) == b"789"
    assert store.get("r", 5, 100) == b"56789"
    assert store.get("r", 20, 4) == b""
    assert store.get("r", 3, 0) == b""


def test_missing_key_raises_object_not_found(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFound) as info:
        store.get("nope/missing")
    assert "nope/missing" in str(info.value)
    with pytest.raises(ObjectNotFound):
        store.get("nope/missing", 0, 4)


def test_list_is_lexical_with_prefix_and_start_after(store: ObjectStore) -> None:
    keys = [
        "index/000000000/000000000002_worker_0.json",
        "index/000000000/000000000010_worker_0.json",
        "index/000000000/000000000010_worker_1.json",
        "index/000000001/000000001000_worker_0.json",
        "events/000000000002/000000000002_worker_0.tfevents",
        "indexical",
        "zzz",
    ]
    for k in reversed(keys):
        store.put(k, k.encode())
    index = sorted(k for k in keys if k.startswith("index/"))
    assert list(store.list("index/")) == index
    assert list(store.list("index/", start_after=index[1])) == index[2:]
    assert list(store.list("index/", start_after=index[-1])) == []
    # start_after need not be an existing key, and may sort before the prefix
    assert list(store.list("index/", start_after="index/000000000/000000000005")) == index[1:]
    assert list(store.list("index/", start_after="a")) == index
    assert list(store.list("index")) == [*index, "indexical"]
    assert list(store.list()) == sorted(keys)
    assert list(store.list("nothing-here/")) == []


def test_list_many_keys_paginates(store: ObjectStore) -> None:
    # More than one ListObjectsV2 page (1000 keys) on S3.
    keys = [f"p/{i:06d}" for i in range(1100)]
    if isinstance(store, S3ObjectStore):
        for k in keys:
            store.put(k, b"x")
    else:
        for k in keys:
            store.put(k, b"x")
    assert list(store.list("p/")) == keys
    assert list(store.list("p/", start_after="p/000999")) == keys[1000:]


def test_delete(store: ObjectStore) -> None:
    store.put("d/x", b"1")
    store.delete("d/x")
    assert not store.exists("d/x")
    assert list(store.list("d/")) == []
    store.delete("d/x")  # deleting a missing key is fine


def test_child_store_shares_data(store: ObjectStore) -> None:
    child = store.child("run-1")
    child.put("collections/000000000/worker_0_collections.json", b"{}")
    assert store.exists("run-1/collections/000000000/worker_0_collections.json")
    assert list(child.list("collections/")) == ["collections/000000000/worker_0_collections.json"]
    assert child.get("collections/000000000/worker_0_collections.json") == b"{}"


def test_concurrent_put_and_get_never_see_partial_objects(store: ObjectStore) -> None:
    big_a, big_b = b"a" * 300_000, b"b" * 300_000
    store.put("race", big_a)
    seen: set[bytes] = set()
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            data = store.get("race")
            seen.add(data[:1] + data[-1:] + str(len(data)).encode())

    t = threading.Thread(target=reader)
    t.start()
    for i in range(6):
        store.put("race", big_a if i % 2 else big_b)
    stop.set()
    t.join()
    assert seen <= {b"aa300000", b"bb300000"}


def test_local_store_hides_temp_files_and_rejects_escapes(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "x.json.tmp").write_bytes(b"partial")
    store.put("index/y.json", b"{}")
    assert list(store.list("index/")) == ["index/y.json"]
    with pytest.raises(StorageError):
        store.put("../outside", b"x")
    assert not (tmp_path.parent / "outside").exists()


@pytest.mark.parametrize(
    ("uri", "kind"),
    [
        ("/tmp/some/dir", LocalObjectStore),
        ("relative/dir", LocalObjectStore),
        ("file:///tmp/x", LocalObjectStore),
        ("memory://name/prefix", InMemoryObjectStore),
    ],
)
def test_open_store_picks_backend(uri: str, kind: Callable[..., ObjectStore]) -> None:
    assert isinstance(open_store(uri), kind)  # type: ignore[arg-type]


def test_open_store_s3(moto_server: object) -> None:
    store = open_store("s3://bucket-name/a/b")
    assert isinstance(store, S3ObjectStore)
    assert (store.bucket, store.prefix) == ("bucket-name", "a/b")
    assert store.uri == "s3://bucket-name/a/b"


@pytest.mark.parametrize("uri", ["s3://", "gs://bucket/x", "file://remote-host/x"])
def test_open_store_rejects_bad_uris(uri: str) -> None:
    with pytest.raises(StorageError):
        open_store(uri)


def test_memory_stores_with_same_name_share_data() -> None:
    a = open_store("memory://shared-contract/run")
    b = open_store("memory://shared-contract/run")
    a.put("k", b"v")
    assert b.get("k") == b"v"


@pytest.mark.parametrize("fast_get", [True, False], ids=["fast", "boto3"])
def test_store_opened_after_credentials_change_uses_the_new_ones(
    seaweedfs_server: object, monkeypatch: pytest.MonkeyPatch, fast_get: bool
) -> None:
    # SeaweedFS checks signatures (moto does not). boto3's default session would keep the
    # credentials it resolved first, so one of the two middle stores would use stale ones.
    import servers

    server: servers.S3Server = seaweedfs_server  # type: ignore[assignment]
    for k, v in server.env().items():
        monkeypatch.setenv(k, v)
    bucket = servers.new_bucket(server)
    good = S3ObjectStore(bucket, "creds", fast_get=fast_get)
    good.put("k", b"v")
    assert good.get("k") == b"v"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "not-a-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    bad = S3ObjectStore(bucket, "creds", fast_get=fast_get)
    with pytest.raises(StorageError, match=r"InvalidAccessKeyId|AccessDenied|SignatureDoesNotMatch"):
        bad.get("k")
    with pytest.raises(StorageError):
        list(bad.list())
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", server.secret_key)
    again = open_store(f"s3://{bucket}/creds")
    assert again.get("k") == b"v"
    assert list(again.list()) == ["k"]
    assert good.get("k") == b"v"  # a store keeps the credentials it was opened with
