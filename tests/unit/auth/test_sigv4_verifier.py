"""The verifier computes exactly what botocore's SigV4 signers sign: header and presigned
(query) auth, odd paths and queries, repeated and space-padded headers, the Date header, session
tokens, X-Amz-Content-Sha256; and it refuses each way a signature can be wrong with AWS's code."""

from __future__ import annotations

import datetime as dt
import urllib.parse
from pathlib import Path
from typing import Any

import botocore.auth
import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from murphy.auth.keys import KeyRing
from murphy.auth.verifier import HttpRequest, Verifier
from murphy.exceptions import (
    AuthFailure,
    ExpiredTokenException,
    IncompleteSignatureException,
    InvalidSignatureException,
    MissingAuthenticationTokenException,
    UnrecognizedClientException,
)
from murphy.settings import Settings
from murphy.store.memory import InMemoryJobStore

NOW = dt.datetime(2026, 3, 4, 5, 6, 7)
ALL = frozenset({"sagemaker", "murphy", "logs"})


class Clock:
    def __init__(self) -> None:
        self.now = NOW.replace(tzinfo=dt.timezone.utc).timestamp()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Verifier, KeyRing, Clock]:
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: NOW)
    clock = Clock()
    ring = KeyRing(InMemoryJobStore(), Settings(data_dir=tmp_path), clock=clock)
    return Verifier(ring, clock=clock), ring, clock


def received(req: AWSRequest) -> tuple[HttpRequest, dict[str, str]]:
    """``req`` as the server sees it: raw path and query, lower-case headers with Host."""
    url = urllib.parse.urlsplit(req.url)
    headers: dict[str, list[str]] = {"host": [url.netloc]}
    for name, value in req.headers.items():
        headers.setdefault(name.lower(), []).append(value if isinstance(value, str) else value.decode())
    body = req.body if isinstance(req.body, bytes) else (req.body or "").encode()
    query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
    return HttpRequest(req.method, url.path or "/", url.query, headers, body), query


def check(verifier: Verifier, req: AWSRequest, services: frozenset[str] = ALL) -> Any:
    http, query = received(req)
    claim = verifier.claim(http, query)
    return verifier.verify(http, claim, verifier.load(claim.access_key_id), services)


def new_key(ring: KeyRing) -> Credentials:
    k = ring.create("111111111111", "alice")["AccessKey"]
    return Credentials(k["AccessKeyId"], k["SecretAccessKey"])


REQUESTS = [
    ("POST", "http://h:8080/", {"X-Amz-Target": "SageMaker.ListTrainingJobs",
                                "Content-Type": "application/x-amz-json-1.1"}, b'{"MaxResults": 5}'),
    ("GET", "http://h:8080/v1/training-jobs/a%20b~c", {}, b""),
    ("GET", "http://h/v1/events?pattern=%7B%22a%22%3A%5B1%5D%7D&after=3&limit=", {}, b""),
    ("GET", "http://h/v1//training-jobs/./x/../y/", {"X-Custom": "  a   b  "}, b""),
    ("DELETE", "http://h/v1/subscriptions/n%2Fme", {"Accept": "application/json"}, b""),
    ("POST", "http://h/v1/subscriptions", {"Content-Type": "application/json"}, "é ünïcode".encode()),
]


@pytest.mark.parametrize(("method", "url", "headers", "body"), REQUESTS)
def test_header_auth_matches_botocore(env: tuple[Verifier, KeyRing, Clock], method: str, url: str,
                                      headers: dict[str, str], body: bytes) -> None:
    verifier, ring, _ = env
    creds = new_key(ring)
    req = AWSRequest(method=method, url=url, headers=dict(headers), data=body)
    SigV4Auth(creds, "sagemaker", "eu-central-1").add_auth(req)
    principal = check(verifier, req)
    assert (principal.account, principal.region, principal.name) == ("111111111111", "eu-central-1", "alice")


@pytest.mark.parametrize(("method", "url", "headers", "body"), REQUESTS[1:3])
def test_presigned_query_auth_matches_botocore(env: tuple[Verifier, KeyRing, Clock], method: str, url: str,
                                               headers: dict[str, str], body: bytes) -> None:
    verifier, ring, clock = env
    creds = new_key(ring)
    req = AWSRequest(method=method, url=url, headers=dict(headers), data=body)
    SigV4QueryAuth(creds, "murphy", "us-east-1", expires=600).add_auth(req)
    check(verifier, req)
    clock.now += 601  # X-Amz-Expires, not the 5-minute skew, bounds a presigned URL
    with pytest.raises(InvalidSignatureException, match="Signature expired"):
        check(verifier, req)


def test_date_header_and_content_sha256(env: tuple[Verifier, KeyRing, Clock]) -> None:
    verifier, ring, _ = env
    creds = new_key(ring)
    req = AWSRequest(method="POST", url="http://h/", headers={"Date": "x"}, data=b"{}")
    SigV4Auth(creds, "sagemaker", "us-east-1").add_auth(req)
    assert "X-Amz-Date" not in req.headers
    check(verifier, req)
    import hashlib

    req = AWSRequest(method="POST", url="http://h/", data=b"{}",
                     headers={"X-Amz-Content-SHA256": hashlib.sha256(b"{}").hexdigest()})
    SigV4Auth(creds, "sagemaker", "us-east-1").add_auth(req)
    check(verifier, req)
    req.data = b"{ }"  # the declared hash no longer matches the body
    with pytest.raises(InvalidSignatureException, match="x-amz-content-sha256"):
        check(verifier, req)


def test_every_way_to_be_wrong(env: tuple[Verifier, KeyRing, Clock]) -> None:
    verifier, ring, clock = env
    creds = new_key(ring)

    def signed(**change: Any) -> AWSRequest:
        c = Credentials(change.get("akid", creds.access_key), change.get("secret", creds.secret_key),
                        change.get("token"))
        req = AWSRequest(method="POST", url="http://h/", headers={"X-Amz-Target": "SageMaker.X"}, data=b"{}")
        SigV4Auth(c, change.get("service", "sagemaker"), "us-east-1").add_auth(req)
        return req

    cases: list[tuple[AWSRequest, type[AuthFailure], str]] = [
        (signed(secret="x" * 40), InvalidSignatureException, "does not match"),
        (signed(akid="AKIAUNKNOWNUNKNOWNXX"), UnrecognizedClientException, "security token included"),
        (signed(token="tok"), UnrecognizedClientException, "security token included"),
        (signed(service="logs"), InvalidSignatureException, "correct service: 'sagemaker'"),
    ]
    for req, error, text in cases:
        http, query = received(req)
        claim = verifier.claim(http, query)
        with pytest.raises(error, match=text):
            verifier.verify(http, claim, verifier.load(claim.access_key_id), frozenset({"sagemaker"}))
    tampered = signed()
    tampered.headers.replace_header("X-Amz-Target", "SageMaker.Y")
    with pytest.raises(InvalidSignatureException):
        check(verifier, tampered)
    with pytest.raises(MissingAuthenticationTokenException, match=r"^Missing Authentication Token$"):
        verifier.claim(HttpRequest("POST", "/", "", {}, b""), {})
    for header in ("Bearer x", "AWS4-HMAC-SHA256 Credential=a/b", "AWS4-HMAC-SHA256 Signature=0"):
        with pytest.raises(IncompleteSignatureException):
            verifier.claim(HttpRequest("POST", "/", "", {"authorization": [header], "x-amz-date": ["20260304T050607Z"]},
                                       b""), {})
    ok = signed()
    clock.now += 301
    with pytest.raises(InvalidSignatureException, match=r"^Signature expired: 20260304T050607Z is now earlier than "
                                                        r"20260304T050608Z \(20260304T051108Z - 5 min.\)$"):
        check(verifier, ok)
    clock.now -= 602
    with pytest.raises(InvalidSignatureException, match=r"^Signature not yet current: "):
        check(verifier, ok)


def test_session_credentials_expire(env: tuple[Verifier, KeyRing, Clock]) -> None:
    verifier, ring, clock = env
    c = ring.create_session("222222222222", duration_s=900)["Credentials"]
    creds = Credentials(c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"])
    req = AWSRequest(method="GET", url="http://h/v1/events")
    SigV4Auth(creds, "murphy", "us-east-1").add_auth(req)
    assert check(verifier, req).account == "222222222222"
    clock.now += 901
    verifier.forget()
    with pytest.raises(ExpiredTokenException, match="is expired"):
        check(verifier, req)


def test_the_store_holds_only_the_sealed_secret(env: tuple[Verifier, KeyRing, Clock]) -> None:
    _, ring, _ = env
    k = ring.create("111111111111")["AccessKey"]
    stored = ring.store.get_access_key(k["AccessKeyId"])
    assert k["SecretAccessKey"] not in repr(stored) and stored.sealed_secret.startswith("fernet:v1:")
    resolved = ring.resolve(k["AccessKeyId"])
    assert resolved is not None and resolved.secret == k["SecretAccessKey"]
    assert k["SecretAccessKey"] not in repr(resolved)
