"""murphy.storage.gateway: S3 reached through host socket + container loopback, for real."""

from __future__ import annotations

import socket
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from murphy.core.ports import free_port
from murphy.storage import gateway
from murphy.storage.s3 import S3ObjectStore
from servers import S3Server


@pytest.fixture
def chain(tmp_path: Path, s3_server: S3Server) -> Iterator[str]:
    """host socket → S3 server, loopback port → host socket; yields the loopback endpoint."""
    url = urllib.parse.urlsplit(s3_server.endpoint_url)
    sock = str(tmp_path / "s3.sock")
    host_side = gateway.serve_unix(sock, url.hostname or "127.0.0.1", url.port or 80)
    port = free_port()
    inner = gateway.serve_loopback(port, sock)
    yield f"http://127.0.0.1:{port}"
    inner.close()
    host_side.close()


def test_s3_round_trip_through_the_gateway(chain: str, s3_server: S3Server) -> None:
    bucket = f"gw-{uuid.uuid4().hex[:8]}"
    s3_server.client().create_bucket(Bucket=bucket)
    import boto3

    client = boto3.client("s3", endpoint_url=chain, aws_access_key_id=s3_server.access_key,
                          aws_secret_access_key=s3_server.secret_key, region_name=s3_server.region)
    store = S3ObjectStore(bucket, "p", client=client)
    payload = bytes(range(256)) * 4096  # 1 MiB: more than one pump chunk each way
    store.put("a/blob", payload)
    store.put("a/small", b"x")
    assert store.get("a/blob") == payload
    assert store.get("a/blob", start=10, length=10) == payload[10:20]
    assert list(store.list("a/")) == ["a/blob", "a/small"]
    # Many concurrent connections (a boto3 pool) all get through.
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            store.put(f"c/{i}", str(i).encode())
            assert store.get(f"c/{i}") == str(i).encode()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []


def test_unreachable_endpoint_closes_the_client_connection(tmp_path: Path) -> None:
    sock = str(tmp_path / "s3.sock")
    dead = free_port()  # nothing listens there
    host_side = gateway.serve_unix(sock, "127.0.0.1", dead)
    port = free_port()
    inner = gateway.serve_loopback(port, sock)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert c.recv(10) == b""  # closed, not hung
    finally:
        inner.close()
        host_side.close()


def test_start_from_env(tmp_path: Path) -> None:
    assert gateway.start_from_env({}) is None
