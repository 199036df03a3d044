"""The S3 store's fast read path (murphy.storage.s3fast) against the real servers and botocore.

The contract suite (test_object_store.py) already runs every S3 read through the fast path; these
tests check that it is really taken, that it answers like boto3 on awkward keys and ranges, that
its signatures are botocore's, and how it retries and falls back.
"""

from __future__ import annotations

import datetime
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from murphy.exceptions import ObjectNotFound, StorageError
from murphy.storage import S3ObjectStore
from murphy.storage.s3fast import ATTEMPTS, FallBack, FastS3, Frozen, SigV4Signer, canonical_query

KEYS = ["plain.json", "with space/and+plus=eq&amp.bin", "ünï/cødé~%41.json", "x?y#z;'(*)!@$,"]


@pytest.fixture(params=["moto", "seaweedfs"])
def stores(request: pytest.FixtureRequest) -> tuple[S3ObjectStore, S3ObjectStore]:
    """(fast store, boto3-only store) on the same fresh bucket."""
    import servers

    server = request.getfixturevalue(f"{request.param}_server")
    bucket = servers.new_bucket(server)
    fast = S3ObjectStore(bucket, "pre fix", client=server.client())
    slow = S3ObjectStore(bucket, "pre fix", client=server.client(), fast_get=False)
    return fast, slow


def _fast_of(store: S3ObjectStore) -> FastS3:
    fast = store._conn.fast()
    assert fast is not None, "the fast path should apply to a path-style client with credentials"
    return fast


def test_fast_path_is_taken_and_matches_boto3(stores: tuple[S3ObjectStore, S3ObjectStore]) -> None:
    fast, slow = stores
    for i, key in enumerate(KEYS):
        slow.put(key, bytes(range(i, i + 40)))
    fast_path = _fast_of(fast)
    assert slow._conn.fast() is None
    sent: list[str] = []
    send = fast_path._pool.send

    def counting(method: str, url: str, headers: dict[str, str]) -> tuple[int, bytes]:
        sent.append(method)
        return send(method, url, headers)

    fast_path._pool.send = counting  # type: ignore[method-assign]
    for key in KEYS:
        for start, length in [(0, None), (3, None), (5, 10), (0, 40), (39, 5), (40, 1), (100, None), (7, 0)]:
            assert fast.get(key, start, length) == slow.get(key, start, length), (key, start, length)
        assert fast.exists(key) and slow.exists(key)
    assert sent.count("GET") >= 7 * len(KEYS) and sent.count("HEAD") == len(KEYS)  # (7, 0) sends nothing
    assert list(fast.list()) == list(slow.list()) == sorted(KEYS)
    assert list(fast.list("with space/")) == ["with space/and+plus=eq&amp.bin"]
    assert list(fast.list("", start_after="plain.json")) == list(slow.list("", start_after="plain.json"))
    assert not fast.exists("missing") and not fast.exists("with space")
    assert sent.count("HEAD") == len(KEYS) + 2
    assert not fast_path.disabled


def test_fast_path_missing_key_and_empty_object(stores: tuple[S3ObjectStore, S3ObjectStore]) -> None:
    fast, _ = stores
    with pytest.raises(ObjectNotFound) as info:
        fast.get("no/such key")
    assert info.value.key == "no/such key"
    with pytest.raises(ObjectNotFound):
        fast.get("no/such key", 2, 5)
    fast.put("empty", b"")
    assert fast.get("empty") == b"" and fast.get("empty", 0, 4) == b"" and fast.get("empty", 3) == b""


def test_fast_path_missing_bucket_is_not_found(moto_server: Any) -> None:
    store = S3ObjectStore("no-such-bucket-murphy", "", client=moto_server.client())
    with pytest.raises(ObjectNotFound):
        store.get("k")


def test_session_token_is_signed_and_accepted(moto_server: Any) -> None:
    import boto3
    from botocore.config import Config

    import servers

    bucket = servers.new_bucket(moto_server)
    client = boto3.session.Session().client(
        "s3", endpoint_url=moto_server.endpoint_url, region_name="us-east-1",
        aws_access_key_id="AKIDTEMP", aws_secret_access_key="secret", aws_session_token="the-token",
        config=Config(s3={"addressing_style": "path"}),
    )
    store = S3ObjectStore(bucket, "t", client=client)
    store.put("k", b"0123456789")
    assert store.get("k", 2, 3) == b"234"
    assert _fast_of(store)._frozen().token == "the-token"


def test_wrong_signature_falls_back_to_boto3_and_disables_the_fast_path(seaweedfs_server: Any) -> None:
    from botocore.credentials import Credentials

    import servers

    bucket = servers.new_bucket(seaweedfs_server)
    store = S3ObjectStore(bucket, "p", client=seaweedfs_server.client())
    store.put("k", b"data")
    broken = FastS3(seaweedfs_server.endpoint_url, "us-east-1", Credentials(seaweedfs_server.access_key, "wrong-secret"))
    store._conn._fast, store._conn._fast_resolved = broken, True
    with pytest.raises(FallBack):
        broken.get(bucket, "p/k", None, "k")
    assert store.get("k", 1) == b"ata"  # SeaweedFS says 403 to the fast path; boto3 answers
    assert broken.disabled and store._conn.fast() is None
    assert store.get("k") == b"data"


@pytest.mark.parametrize("token", [None, "FQoGZXIvYXdzE//token+with/slashes="])
@pytest.mark.parametrize(
    ("key", "headers", "params"),
    [
        ("index/000000000/000000000002_worker_0.json", {}, {}),
        ("events/a b/ünï+%2F~x.tfevents", {"range": "bytes=10-99"}, {}),
        ("", {}, {"list-type": "2", "prefix": "index/", "start-after": "index/0 0+1", "encoding-type": "url"}),
    ],
)
def test_signer_matches_botocore(token: str | None, key: str, headers: dict[str, str], params: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from urllib.parse import quote

    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    when = datetime.datetime(2026, 11, 29, 23, 59, 58)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: when)
    path = f"/bucket-1/{quote(key, safe='/~')}" if key else "/bucket-1"
    query = canonical_query(params)
    url = f"http://127.0.0.1:8333{path}" + (f"?{query}" if query else "")
    request = AWSRequest("GET", url, headers={k.title(): v for k, v in headers.items()})
    botocore.auth.S3SigV4Auth(Credentials("AKID", "s3cr3t", token), "s3", "eu-west-3").add_auth(request)
    ours = SigV4Signer("eu-west-3").sign(Frozen("AKID", "s3cr3t", token), "GET", "127.0.0.1:8333", path, query, headers, "20261129T235958Z")
    assert ours["authorization"] == request.headers["Authorization"]
    assert ours.get("x-amz-security-token") == request.headers.get("X-Amz-Security-Token")


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers GETs with the next (status, body) of the server's script."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        status, body = self.server.script.pop(0) if self.server.script else (200, b"done")  # type: ignore[attr-defined]
        self.server.seen.append(self.headers.get("Range"))  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[Any]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    srv.script, srv.seen = [], []  # type: ignore[attr-defined]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _fast_to(srv: Any) -> FastS3:
    from botocore.credentials import Credentials

    return FastS3(f"http://127.0.0.1:{srv.server_address[1]}", "us-east-1", Credentials("a", "b"))


def test_5xx_is_retried_then_succeeds(scripted: Any) -> None:
    scripted.script[:] = [(503, b"slow down"), (500, b"oops"), (206, b"234")]
    assert _fast_to(scripted).get("b", "k", "bytes=2-4", "k") == (206, b"234")
    assert scripted.seen == ["bytes=2-4"] * 3


def test_persistent_5xx_is_a_storage_error(scripted: Any) -> None:
    scripted.script[:] = [(502, b"bad gateway")] * ATTEMPTS
    with pytest.raises(StorageError, match=f"after {ATTEMPTS} attempts: HTTP 502"):
        _fast_to(scripted).get("b", "k", None, "k")


def test_connection_refused_is_a_storage_error() -> None:
    from botocore.credentials import Credentials

    import servers

    dead = FastS3(f"http://127.0.0.1:{servers.free_port()}", "us-east-1", Credentials("a", "b"), timeout=2)
    with pytest.raises(StorageError, match="ConnectionRefusedError"):
        dead.get("b", "k", None, "k")


def test_other_4xx_falls_back_and_416_is_returned(scripted: Any) -> None:
    scripted.script[:] = [(403, b"<Error/>"), (416, b""), (404, b"")]
    fast = _fast_to(scripted)
    with pytest.raises(FallBack):
        fast.get("b", "k", None, "k")
    assert fast.get("b", "k", "bytes=100-", "k") == (416, b"")
    with pytest.raises(ObjectNotFound):
        fast.get("b", "k", None, "k")
