"""Issue 18 §4: a property-based fuzz of every operation (the AWS JSON 1.1 targets, the REST
mirror, the events API), with auth off and with ``--auth sigv4`` (requests signed by botocore,
plus unsigned and garbled ones): never a 5xx, every error has ``__type`` and a message, and the
app still answers afterwards."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from apihelp import TestClient, make_plane, training_request
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api_fuzz import AUTH, GARBAGE_AUTH, JSON, QUERY, REST, WIRE_TARGETS, bodies
from api_fuzz import check as check_raw
from murphy.api.app import create_app
from murphy.auth.keys import KeyRing
from murphy.events.bus import EventBus

BODIES = bodies(training_request("fz"))


class Harness:
    def __init__(self, tmp_path: Path, auth: str) -> None:
        plane = make_plane(tmp_path)
        plane.settings = plane.settings.model_copy(update={"auth": auth})
        self.bus = EventBus(plane.store, plane.settings)
        self.client = TestClient(create_app(plane.service, plane.settings, self.bus), raise_server_exceptions=False)
        key = KeyRing(plane.store, plane.settings).create("123456789012")["AccessKey"]
        self.creds = Credentials(key["AccessKeyId"], key["SecretAccessKey"])
        self.signing = auth == "sigv4"

    def send(self, method: str, path: str, body: bytes, headers: dict[str, str], how: str) -> Any:
        url = "http://testserver" + path
        if self.signing and how in ("sign", "wrong-service"):
            service = "logs" if how == "wrong-service" else ("sagemaker" if path == "/" else "murphy")
            request = AWSRequest(method=method, url=url, data=body, headers=headers)
            SigV4Auth(self.creds, service, "eu-west-1").add_auth(request)
            headers = {k: str(v) for k, v in request.headers.items()}
        elif how == "garbage":
            headers = {**headers, **GARBAGE_AUTH}
        return self.client.request(method, url, content=body, headers=headers)


def check(response: Any) -> None:
    check_raw(response.status_code, response.content)


@pytest.fixture(params=["none", "sigv4"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path, request.param)
    with h.client:
        yield h
    h.bus.close()


FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])


@FUZZ
@given(target=WIRE_TARGETS, body=BODIES, raw=st.none() | st.binary(max_size=64), how=AUTH,
       content_type=st.sampled_from(["application/x-amz-json-1.1", "application/json", "text/plain", ""]))
def test_the_wire_never_fails_with_a_5xx(harness: Harness, target: str, body: Any, raw: bytes | None, how: str,
                                         content_type: str) -> None:
    data = raw if raw is not None else json.dumps(body).encode()
    headers = {"X-Amz-Target": target, "Content-Type": content_type}
    check(harness.send("POST", "/", data, {k: v for k, v in headers.items() if v}, how))


@FUZZ
@given(route=REST, query=QUERY, body=st.none() | JSON, how=AUTH)
def test_the_rest_routes_never_fail_with_a_5xx(harness: Harness, route: tuple[str, str], query: dict[str, str],
                                               body: Any, how: str) -> None:
    method, path = route
    quoted = "/".join(urllib.parse.quote(p, safe="") for p in path.split("/"))
    if query:
        quoted += "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote, safe="-_.~")
    data = b"" if body is None or method in ("GET", "DELETE") else json.dumps(body).encode()
    check(harness.send(method, quoted, data, {"Content-Type": "application/json"} if data else {}, how))


def test_the_app_stays_healthy_after_fuzzing(harness: Harness) -> None:
    for _ in range(3):
        check(harness.send("POST", "/", b"{", {"X-Amz-Target": "SageMaker.ListTrainingJobs",
                                               "Content-Type": "application/x-amz-json-1.1"}, "sign"))
    assert harness.client.get("/healthz").json() == {"status": "ok"}
    # The signed requests above reach the operations (the fuzz is not only the auth check's).
    ok = harness.send("POST", "/", b"{}", {"X-Amz-Target": "SageMaker.ListTrainingJobs",
                                          "Content-Type": "application/x-amz-json-1.1"}, "sign")
    assert ok.status_code == 200, ok.text
    rest = harness.send("GET", "/v1/subscriptions?x=a%20b", b"", {}, "sign")
    assert rest.status_code == 200, rest.text
