"""Issue 18 §4 against a live ``murphy server`` process (real HTTP over a socket, auth off and
``--auth sigv4``): every operation of the AWS JSON 1.1 wire, the REST mirror and the events API,
fuzzed by hypothesis with the strategies of the in-process fuzz (tests/api_fuzz.py), signed by
botocore, unsigned or garbled. Zero 5xx, every error has ``__type`` and a message, and the server
is still alive and answering afterwards. Bounded (``MURPHY_LIVE_FUZZ_EXAMPLES``, 120 per route
family and auth mode) so it fits in CI."""

from __future__ import annotations

import http.client
import json
import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_auth import keys
from test_control_plane import job_request

from api_fuzz import AUTH, GARBAGE_AUTH, JSON, QUERY, REST, WIRE_TARGETS, bodies, check
from murphy_server import MakeServer, MurphyServer

EXAMPLES = int(os.environ.get("MURPHY_LIVE_FUZZ_EXAMPLES", "120"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
BODIES = bodies(job_request("fz", "bucket", {"lr": "0.1"}))
CONTENT_TYPES = st.sampled_from(["application/x-amz-json-1.1", "application/json", "text/plain", ""])


@dataclass
class Live:
    server: MurphyServer
    creds: Credentials | None

    def send(self, method: str, path: str, body: bytes, headers: dict[str, str], how: str) -> tuple[int, bytes]:
        url = self.server.endpoint + path
        if self.creds is not None and how in ("sign", "wrong-service"):
            service = "logs" if how == "wrong-service" else ("sagemaker" if path == "/" else "murphy")
            request = AWSRequest(method=method, url=url, data=body, headers=headers)
            SigV4Auth(self.creds, service, "eu-west-1").add_auth(request)
            headers = {k: str(v) for k, v in request.headers.items()}
        elif how == "garbage":
            headers = {**headers, **GARBAGE_AUTH}
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        try:
            conn.request(method, path, body=body or None, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()


@pytest.fixture(params=["none", "sigv4"])
def live(request: pytest.FixtureRequest, make_server: MakeServer, tmp_path: Path) -> Live:
    data = tmp_path / "murphy"
    if request.param == "none":
        return Live(make_server("--runtime", "fake", data_dir=data), None)
    key = keys(data, "create", "--account", "111111111111", "--name", "fuzz")["AccessKey"]
    server = make_server("--runtime", "fake", "--auth", "sigv4", data_dir=data)
    return Live(server, Credentials(key["AccessKeyId"], key["SecretAccessKey"]))


def _rest_path(path: str, query: dict[str, str]) -> str:
    quoted = "/".join(urllib.parse.quote(p, safe="") for p in path.split("/"))
    if query:
        quoted += "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote, safe="-_.~")
    return quoted


@pytest.mark.slow
def test_a_live_server_never_answers_5xx_and_stays_healthy(live: Live) -> None:
    @FUZZ
    @given(target=WIRE_TARGETS, body=BODIES, raw=st.none() | st.binary(max_size=64), how=AUTH, content_type=CONTENT_TYPES)
    def wire(target: str, body: Any, raw: bytes | None, how: str, content_type: str) -> None:
        data = raw if raw is not None else json.dumps(body).encode()
        headers = {k: v for k, v in {"X-Amz-Target": target, "Content-Type": content_type}.items() if v}
        check(*live.send("POST", "/", data, headers, how))

    @FUZZ
    @given(route=REST, query=QUERY, body=st.none() | JSON, how=AUTH)
    def rest(route: tuple[str, str], query: dict[str, str], body: Any, how: str) -> None:
        method, path = route
        data = b"" if body is None or method in ("GET", "DELETE") else json.dumps(body).encode()
        check(*live.send(method, _rest_path(path, query), data, {"Content-Type": "application/json"} if data else {}, how))

    wire()
    rest()
    assert live.server.proc is not None and live.server.proc.poll() is None, live.server.log()[-3000:]
    assert live.send("GET", "/healthz", b"", {}, "none") == (200, b'{"status":"ok"}')
    status, body = live.send("POST", "/", b"{}", {"X-Amz-Target": "SageMaker.ListTrainingJobs",
                                                  "Content-Type": "application/x-amz-json-1.1"}, "sign")
    assert status == 200 and "TrainingJobSummaries" in json.loads(body), body
    assert "Traceback" not in live.server.log(), live.server.log()[-3000:]
