"""Batch GETs (``S3ObjectStore.get_many`` over murphy.storage.s3batch) and the trial discovery on them.

Against moto's server and SeaweedFS: same bytes as one GET at a time, missing keys, pipelining,
a torn index object among good ones. Against a scripted HTTP server: every failure the batch
must survive (5xx, dropped and silently closed connections, a server that never answers,
answers it cannot frame) without hanging, and a window that bounds what is held.
"""

from __future__ import annotations

import http.server
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from murphy.core.collection import Collection, CollectionsDoc
from murphy.core.modes import ModeKeys
from murphy.exceptions import StorageError
from murphy.storage import S3ObjectStore
from murphy.storage.s3fast import FastS3
from murphy.tensorio.locations import index_file_key
from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training
from murphy.trial import create_trial

pytestmark = pytest.mark.s3

KEYS = ["plain.json", "with space/and+plus=eq&amp.bin", "ünï/cødé~%41.json", "x?y#z;'(*)!@$,"]


def _counting(fast: FastS3) -> list[str]:
    """Record the single-request GETs of ``fast`` (the batch must not need them)."""
    calls: list[str] = []
    single = fast.get

    def get(bucket: str, key: str, range_header: str | None, label: str) -> tuple[int, bytes]:
        calls.append(label)
        return single(bucket, key, range_header, label)

    fast.get = get  # type: ignore[method-assign]
    return calls


@pytest.mark.parametrize(("connections", "depth"), [(16, 1), (3, 8)])
def test_get_many_matches_single_gets(s3_server: Any, connections: int, depth: int) -> None:
    import servers

    bucket = servers.new_bucket(s3_server)
    store = S3ObjectStore(bucket, "pre fix", client=s3_server.client())
    keys = KEYS + [f"index/{i:04d}/k {i}.json" for i in range(150)]
    contents = {key: f"{key}:{i}".encode() * (1 + i % 7) for i, key in enumerate(keys)}
    contents["empty"] = b""
    for key, data in contents.items():
        store.put(key, data)
    wanted = [*keys[:80], "no such key", "empty", *keys[80:], "index/gone"]
    fast = store._conn.fast()
    assert fast is not None
    fast._pipeline.connections, fast._pipeline.depth = connections, depth
    singles = _counting(fast)
    got = list(store.get_many(wanted))
    assert [k for k, _ in got] == wanted
    assert got == [(k, contents.get(k)) for k in wanted]
    assert singles == []  # every answer came from the batch
    assert list(store.get_many([])) == []
    assert not fast.disabled


def test_get_many_falls_back_to_boto3_when_the_fast_path_is_refused(seaweedfs_server: Any) -> None:
    from botocore.credentials import Credentials

    import servers

    bucket = servers.new_bucket(seaweedfs_server)
    store = S3ObjectStore(bucket, "p", client=seaweedfs_server.client())
    keys = [f"k{i:03d}" for i in range(40)]
    for key in keys:
        store.put(key, key.encode())
    broken = FastS3(seaweedfs_server.endpoint_url, "us-east-1", Credentials(seaweedfs_server.access_key, "wrong-secret"))
    store._conn._fast, store._conn._fast_resolved = broken, True
    assert list(store.get_many([*keys, "missing"])) == [*((k, k.encode()) for k in keys), ("missing", None)]
    assert broken.disabled  # the first 403 went to boto3, which answered: the rest went there too


def _write_trial(store: S3ObjectStore, steps: int) -> list[str]:
    names = ["a", "b", "c"]
    write_collections(store, CollectionsDoc({"default": Collection("default")}, 1))
    for step in range(steps):
        with StepWriter(store, step, "worker_0", ModeKeys.TRAIN, step) as w:
            for n, name in enumerate(names):
                w.add(name, np.full((2, 3), step * 10 + n, dtype=np.float32))
    write_end_of_training(store)
    return names


def test_trial_skips_torn_and_missing_index_objects_among_good_ones(
    s3_server: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import servers

    for k, v in s3_server.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("MURPHY_S3_LOCAL_ROOT", raising=False)
    bucket = servers.new_bucket(s3_server)
    store = S3ObjectStore(bucket, "job/out", endpoint_url=s3_server.endpoint_url)
    names = _write_trial(store, 60)
    torn = store.get(index_file_key(7, "worker_0"))
    store.put(index_file_key(7, "worker_0"), torn[: len(torn) // 2])
    store.put(index_file_key(31, "worker_0"), b"\x00garbage{")
    fetched: list[int] = []
    get_many = FastS3.get_many

    def counting(self: FastS3, bucket: str, keys: Any) -> Iterator[tuple[int, bytes]]:
        fetched.append(len(keys))
        return get_many(self, bucket, keys)

    monkeypatch.setattr(FastS3, "get_many", counting)
    with caplog.at_level(logging.WARNING, logger="murphy.trial.discovery"):
        trial = create_trial(f"s3://{bucket}/job/out", poll_interval=0.0, end_delay=0.0)
        steps = trial.steps()
    assert steps == [s for s in range(60) if s not in (7, 31)]
    assert sorted(trial.tensor_names()) == names
    assert fetched and fetched[0] == 60  # one batch for every index file
    assert float(trial.tensor("b").value(59)[0, 0]) == 591.0
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "000000000007_worker_0.json" in logged and "000000000031_worker_0.json" in logged


# --- failures, against a scripted server ---------------------------------------------------------


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers by the key's name: ``ok-*`` 200 with a body naming the key, ``missing`` 404,
    ``flaky`` 500 then 200, ``broken`` always 500, ``chunked`` a chunked 200, ``close`` 200 and
    ``Connection: close``, ``silent`` 200 and then closes without saying so, ``drop`` closes
    without answering the first time, ``hang`` never answers (until teardown)."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        srv: Any = self.server
        name = self.path.rsplit("/", 1)[-1]
        with srv.lock:
            srv.seen.append(name)
            count = srv.seen.count(name)
        if name == "hang":
            srv.release.wait(10)
            self.close_connection = True
            return
        if name == "drop" and count == 1:
            self.close_connection = True
            return
        body = f"body of {name}".encode()
        status = 200
        if name == "missing":
            status, body = 404, b"<Error><Code>NoSuchKey</Code></Error>"
        elif name == "broken" or (name == "flaky" and count == 1):
            status, body = 500, b"<Error><Code>InternalError</Code></Error>"
        self.send_response(status)
        if name == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            return
        if name == "close":
            self.send_header("Connection", "close")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if name in ("close", "silent"):
            self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    srv: Any = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    srv.seen, srv.lock, srv.release = [], threading.Lock(), threading.Event()
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    for k, v in {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


def _store(srv: Any, timeout: float = 5.0, connections: int = 4, depth: int = 1) -> S3ObjectStore:
    from botocore.credentials import Credentials

    url = f"http://127.0.0.1:{srv.server_address[1]}"
    store = S3ObjectStore("b", "", endpoint_url=url)
    fast = FastS3(url, "us-east-1", Credentials("a", "b"), timeout=timeout)
    fast._pipeline.connections, fast._pipeline.depth = connections, depth
    store._conn._fast, store._conn._fast_resolved = fast, True
    return store


def _expected(keys: list[str]) -> list[tuple[str, bytes | None]]:
    return [(k, None if k == "missing" else f"body of {k}".encode()) for k in keys]


@pytest.mark.parametrize("depth", [1, 4])
def test_batch_survives_closes_drops_retries_and_unframed_answers(scripted: Any, depth: int) -> None:
    store = _store(scripted, depth=depth)
    keys = [f"ok-{i}" for i in range(30)]
    keys[3:3] = ["flaky", "missing", "chunked"]
    keys[12:12] = ["close", "drop", "silent"]
    assert list(store.get_many(keys)) == _expected(keys)
    # the idle sockets now include ones the server closed without saying so: reused, then retried
    again = [f"ok-{i}" for i in range(40, 60)]
    assert list(store.get_many(again)) == _expected(again)


def test_a_failing_get_raises_after_the_good_ones(scripted: Any) -> None:
    store = _store(scripted)
    keys = ["ok-1", "ok-2", "broken", "ok-3"]
    got: list[tuple[str, bytes | None]] = []
    with pytest.raises(StorageError, match="HTTP 500"):
        for item in store.get_many(keys):
            got.append(item)
    assert got == _expected(["ok-1", "ok-2"])


def test_a_server_that_never_answers_ends_in_an_error_not_a_hang(scripted: Any) -> None:
    store = _store(scripted, timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(StorageError, match="timed out"):
        list(store.get_many(["ok-1", "hang", "ok-2"]))
    assert time.monotonic() - t0 < 8


def test_the_window_bounds_what_is_fetched_ahead(scripted: Any) -> None:
    store = _store(scripted, connections=4, depth=2)
    fast = store._conn.fast()
    assert fast is not None
    fast._pipeline.window = 6
    keys = [f"ok-{i}" for i in range(40)]
    batch = store.get_many(keys)
    for taken in range(1, 21):
        next(batch)
        assert len(scripted.seen) <= taken + 6
    batch.close()
    assert len(scripted.seen) <= 26


def test_connection_refused_is_a_storage_error() -> None:
    import servers

    url = f"http://127.0.0.1:{servers.free_port()}"
    from botocore.credentials import Credentials

    store = S3ObjectStore("b", "", endpoint_url=url)
    store._conn._fast, store._conn._fast_resolved = FastS3(url, "us-east-1", Credentials("a", "b"), timeout=2), True
    with pytest.raises(StorageError, match="ConnectionRefusedError"):
        list(store.get_many(["k1", "k2"]))


def _self_signed(tmp: Any) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, as PEM files (cryptography comes with moto)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return str(cert_file), str(key_file)


def test_batch_over_tls(scripted: Any, tmp_path: Any) -> None:
    import ssl

    from botocore.credentials import Credentials

    cert, key = _self_signed(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    scripted.socket = server_ctx.wrap_socket(scripted.socket, server_side=True)
    url = f"https://127.0.0.1:{scripted.server_address[1]}"
    fast = FastS3(url, "us-east-1", Credentials("a", "b"), timeout=5, cafile=cert)
    keys = [f"ok-{i}" for i in range(50)]
    keys[5:5] = ["missing", "close"]
    for depth in (1, 4):
        fast._pipeline.connections, fast._pipeline.depth = 3, depth
        got = list(fast.get_many("b", keys))
        assert [(k, s, b) for k, (s, b) in zip(keys, got, strict=True)] == [
            (k, 404, b"<Error><Code>NoSuchKey</Code></Error>") if k == "missing" else (k, 200, f"body of {k}".encode()) for k in keys
        ]
    untrusted = FastS3(url, "us-east-1", Credentials("a", "b"), timeout=5)  # the system CAs only
    assert [s for s, _ in untrusted.get_many("b", ["ok-1"])] == [0]


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\n",  # no length: read to close
        b"HTTP/1.1 100 Continue\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        b"ICY 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 70_000,
    ],
)
def test_parser_refuses_what_it_cannot_frame(head: bytes) -> None:
    from murphy.storage.s3batch import _Unusable, parse_response

    with pytest.raises(_Unusable):
        parse_response(bytearray(head))


def test_parser_frames_back_to_back_answers() -> None:
    from murphy.storage.s3batch import parse_response

    buf = bytearray(
        b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabc"
        b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\n12"
    )
    assert parse_response(buf) == (200, b"abc", False)
    assert parse_response(buf) == (404, b"", True)  # HTTP/1.0 without keep-alive closes
    assert parse_response(buf) is None  # incomplete: nothing taken
    buf += b"345"
    assert parse_response(buf) == (200, b"12345", True)
    assert buf == b""
