"""docs/examples/webhook_receiver.py (the receiver docs/events.md shows) works: run as a process,
it accepts deliveries signed the way murphy signs them, refuses others, and handles an id once."""

from __future__ import annotations

import http.client
import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from murphy.events.envelope import envelope
from murphy.events.webhook import EVENT_ID_HEADER, SIGNATURE_HEADER, encode, sign

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "webhook_receiver.py"
SECRET = "example-secret"


def load_verify() -> Callable[[str, bytes, str | None], bool]:
    spec = importlib.util.spec_from_file_location("docs_webhook_receiver", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    verify: Callable[[str, bytes, str | None], bool] = module.verify
    return verify


def finding_event() -> dict[str, Any]:
    detail = {"TrainingJobName": "seed-exploding", "TrainingJobStatus": "Stopping", "SecondaryStatus": "Stopping",
              "MurphyChanges": [{"Kind": "RuleEvaluationStatus", "From": "InProgress", "To": "IssuesFound",
                                 "RuleConfigurationName": "ExplodingTensor", "Step": 2,
                                 "Tensor": "gradient/LinearRegression_weight"}]}
    return envelope(detail, account="123456789012", region="us-west-2", time=1_796_000_000.0,
                    resources=["arn:aws:sagemaker:us-west-2:123456789012:training-job/seed-exploding"])


def test_verify_accepts_murphys_signature_only() -> None:
    verify = load_verify()
    body = encode(finding_event())
    good = sign(SECRET, body)
    assert verify(SECRET, body, good)
    assert not verify("other-secret", body, good)
    assert not verify(SECRET, body.replace(b"Stopping", b"Stopped!"), good)
    assert not verify(SECRET, body, None) and not verify(SECRET, body, good[len("sha256="):])
    assert not verify(SECRET, body, "sha256=" + "0" * 64)


@pytest.fixture
def example_receiver() -> Iterator[tuple[int, subprocess.Popen[str]]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "MURPHY_WEBHOOK_SECRET": SECRET})
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "the example receiver did not start"
            time.sleep(0.05)
    try:
        yield port, proc
    finally:
        proc.terminate()
        proc.wait(10)


def post(port: int, body: bytes, headers: dict[str, str]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("POST", "/", body=body, headers={"Content-Type": "application/json", **headers})
        return conn.getresponse().status
    finally:
        conn.close()


def test_the_example_receiver_as_a_process(example_receiver: tuple[int, subprocess.Popen[str]]) -> None:
    port, proc = example_receiver
    event = finding_event()
    body = encode(event)
    signed = {EVENT_ID_HEADER: event["id"], SIGNATURE_HEADER: sign(SECRET, body)}
    assert post(port, body, signed) == 204
    assert post(port, body, signed) == 204  # a retry: accepted, not handled twice
    assert post(port, body + b" ", signed) == 401
    assert post(port, body, {EVENT_ID_HEADER: event["id"]}) == 401
    assert post(port, body, {SIGNATURE_HEADER: sign("wrong", body)}) == 401
    proc.terminate()
    out, _ = proc.communicate(timeout=10)
    assert out.splitlines() == [
        "seed-exploding: ExplodingTensor found an issue at step 2 (gradient/LinearRegression_weight)"]
