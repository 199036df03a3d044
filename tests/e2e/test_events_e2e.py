"""Issue #6's acceptance: events from a real ``murphy server`` to real webhook receiver processes
(tests/e2e/webhook_receiver.py), the SSE stream and the Python client, the CLI; faults: the
receiver down for 30 s, the server killed with SIGKILL while events are pending, a receiver that
always fails (dead letters, then redrive)."""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_control_plane import EXPLODING, job_request, watch

from murphy.events import subscribe, verify_signature
from murphy.events.client import parse_sse
from murphy_server import MurphyServer, free_port

RECEIVER = Path(__file__).with_name("webhook_receiver.py")
DOCS_RECEIVER = Path(__file__).parents[2] / "docs" / "examples" / "webhook_receiver.py"
ISSUES = {"detail": {"DebugRuleEvaluationStatuses": {"RuleEvaluationStatus": ["IssuesFound"]}}}
FINDING = {"detail": {"MurphyChanges": {"Kind": ["RuleEvaluationStatus"], "To": ["IssuesFound"]}}}
ALL = {"source": ["aws.sagemaker"]}
#: Retries fast enough for a test, and never giving up while a receiver is down for 30 s.
PATIENT = {"MURPHY_EVENT_RETRY_BASE_S": "0.2", "MURPHY_EVENT_RETRY_CAP_S": "2", "MURPHY_EVENT_MAX_ATTEMPTS": "1000"}


def docs_verify() -> Callable[[str, bytes, str | None], bool]:
    """The signature check from docs/examples/webhook_receiver.py (what the docs tell receivers)."""
    spec = importlib.util.spec_from_file_location("docs_webhook_receiver", DOCS_RECEIVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    verify: Callable[[str, bytes, str | None], bool] = module.verify
    return verify


class Receiver:
    """One receiver process on a fixed port (so it can be down, then back at the same URL)."""

    def __init__(self, tmp_path: Path, name: str) -> None:
        self.port = free_port()
        self.out = tmp_path / f"{name}.jsonl"
        self.mode_file = tmp_path / f"{name}.mode"
        self.proc: subprocess.Popen[str] | None = None

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(RECEIVER), "--port", str(self.port), "--out", str(self.out),
             "--mode-file", str(self.mode_file)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().startswith("ready")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

    def mode(self, mode: str) -> None:
        self.mode_file.write_text(mode)

    def records(self, path: str | None = None) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        rows = [json.loads(line) for line in self.out.read_text().splitlines() if line.strip()]
        return [r for r in rows if path is None or r["path"] == path]

    def delivered(self, path: str | None = None) -> list[dict[str, Any]]:
        """Attempts answered 2xx, each with its parsed event."""
        return [{**r, "event": json.loads(r["body"])} for r in self.records(path) if 200 <= r["status"] < 300]


@pytest.fixture
def make_receiver(tmp_path: Path) -> Iterator[Callable[[str], Receiver]]:
    started: list[Receiver] = []

    def make(name: str) -> Receiver:
        r = Receiver(tmp_path, name)
        r.start()
        started.append(r)
        return r

    yield make
    for r in started:
        r.stop()


def rest(server: MurphyServer, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.endpoint + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as r:
        raw = r.read()
    return json.loads(raw) if raw else None


def subscribe_webhook(server: MurphyServer, name: str, pattern: dict[str, Any], url: str, secret: str) -> str:
    sub = rest(server, "POST", "/v1/subscriptions",
               {"name": name, "pattern": pattern, "target": {"type": "webhook", "url": url, "secret": secret}})
    return str(sub["id"])


def outbox(server: MurphyServer) -> list[tuple[int, dict[str, Any]]]:
    out: list[tuple[int, dict[str, Any]]] = []
    while True:
        page = rest(server, "GET", f"/v1/events?after={out[-1][0] if out else 0}&limit=1000")
        out += [(e["seq"], e["event"]) for e in page["events"]]
        if not page["events"]:
            return out


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def states(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["detail"]["TrainingJobStatus"], e["detail"]["SecondaryStatus"]) for e in events]


def rule_changes(event: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in event["detail"]["MurphyChanges"] if c["Kind"] == "RuleEvaluationStatus"]


def all_delivered(receiver: Receiver, server: MurphyServer, path: str) -> bool:
    want = [e["id"] for _, e in outbox(server)]
    return bool(want) and {d["event"]["id"] for d in receiver.delivered(path)} == set(want)


def assert_in_order_once(deliveries: list[dict[str, Any]]) -> None:
    """Each event id delivered once (a repeat only as a retry of the same id and seq), in seq order."""
    first: dict[str, int] = {}
    for d in deliveries:
        seq = int(d["headers"]["x-murphy-event-seq"])
        assert first.setdefault(d["event"]["id"], seq) == seq, "one id, two seqs"
    seqs = list(first.values())
    assert seqs == sorted(seqs), f"out of order: {seqs}"


@pytest.mark.slow
def test_a_finding_job_sends_every_state_change_in_order_signed(make_server: Any, make_receiver: Any) -> None:
    server = make_server()
    receiver = make_receiver("hooks")
    subscribe_webhook(server, "all", ALL, receiver.url("/all"), "secret-all")
    subscribe_webhook(server, "issues", ISSUES, receiver.url("/issues"), "secret-issues")
    subscribe_webhook(server, "finding", FINDING, receiver.url("/finding"), "secret-finding")
    streamed: list[dict[str, Any]] = []
    client_sub = subscribe(None, streamed.append, server.endpoint)
    try:
        assert client_sub.wait_connected(10)
        client = server.client()
        client.create_training_job(**job_request("events-exploding", "murphy-e2e", EXPLODING))
        job, _ = watch(client, "events-exploding")
        assert job["TrainingJobStatus"] == "Stopped", server.log()[-3000:]
        wait_for(lambda: all_delivered(receiver, server, "/all"), 30, "every event at /all")
        wait_for(lambda: len(streamed) == len(outbox(server)), 10, "every event through the Python client")
    finally:
        client_sub.close()

    stored = outbox(server)
    deliveries = receiver.delivered("/all")
    assert_in_order_once(deliveries)
    assert len(deliveries) == len(stored)  # a healthy receiver: no retries, so no repeats
    verify = docs_verify()
    for d in deliveries:
        body, headers = d["body"].encode(), d["headers"]
        assert verify("secret-all", body, headers["x-murphy-signature-256"])
        assert verify_signature("secret-all", body, headers["x-murphy-signature-256"])
        assert not verify("secret-issues", body, headers["x-murphy-signature-256"])
        assert headers["x-murphy-event-id"] == d["event"]["id"] and headers["content-type"] == "application/json"
    events = [d["event"] for d in deliveries]
    assert [e["id"] for e in events] == [e["id"] for _, e in stored]

    first = events[0]
    assert {k: first[k] for k in ("version", "detail-type", "source", "account", "region", "resources")} == {
        "version": "0", "detail-type": "SageMaker Training Job State Change", "source": "aws.sagemaker",
        "account": "123456789012", "region": "us-west-2",
        "resources": ["arn:aws:sagemaker:us-west-2:123456789012:training-job/events-exploding"]}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", first["time"])
    assert first["detail"]["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "InProgress"

    seen = states(events)
    assert seen[0] == ("InProgress", "Starting") and seen[-1] == ("Stopped", "Stopped"), seen
    assert len(set(seen)) == len(seen), f"an event without a status change: {seen}"
    training, stopping = seen.index(("InProgress", "Training")), seen.index(("Stopping", "Stopping"))
    finding = next(i for i, e in enumerate(events) if any(c["To"] == "IssuesFound" for c in rule_changes(e)))
    assert training < finding <= stopping < len(seen) - 1, seen
    change = next(c for c in rule_changes(events[finding]) if c["To"] == "IssuesFound")
    assert change["RuleConfigurationName"] == "ExplodingTensor" and change["From"] == "InProgress"
    assert isinstance(change["Step"], int) and change["Tensor"], change

    # EventBridge semantics: the DebugRuleEvaluationStatuses pattern matches every event whose
    # detail holds an IssuesFound rule, i.e. the finding and each later state change; the
    # MurphyChanges pattern matches the finding alone.
    issues = receiver.delivered("/issues")
    assert [d["event"]["id"] for d in issues] == [e["id"] for e in events[finding:]]
    assert all(verify("secret-issues", d["body"].encode(), d["headers"]["x-murphy-signature-256"]) for d in issues)
    assert [d["event"]["id"] for d in receiver.delivered("/finding")] == [events[finding]["id"]]

    # The Python client saw the same events in the same order; the stream resumes after an id.
    assert [e["id"] for e in streamed] == [e["id"] for e in events]
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/v1/events/stream", headers={"Last-Event-ID": "2"})
        response = conn.getresponse()
        lines = iter(lambda: response.readline().decode().rstrip("\n"), None)
        blocks = []
        for block in parse_sse(lines):
            blocks.append(block)
            if len([b for b in blocks if b[2] is not None]) == len(stored) - 2:
                break
        assert blocks[0] == ("2", "message", None)  # the stream says where it starts
        assert [(int(i or 0), kind, json.loads(d)["id"]) for i, kind, d in blocks[1:] if d is not None] == [
            (seq, "SageMaker Training Job State Change", e["id"]) for seq, e in stored[2:]]
    finally:
        conn.close()


@pytest.mark.slow
def test_a_receiver_down_for_30_s_gets_every_event_when_it_is_back(make_server: Any, make_receiver: Any) -> None:
    server = make_server("--runtime", "fake", env=PATIENT)
    receiver = make_receiver("down")
    subscribe_webhook(server, "down", ALL, receiver.url(), "s")
    client = server.client()
    client.create_training_job(**job_request("before-outage", "b", EXPLODING))
    wait_for(lambda: receiver.delivered(), 10, "the first delivery")
    receiver.stop()
    went_down = time.monotonic()
    for name in ("during-outage-1", "during-outage-2"):
        client.create_training_job(**job_request(name, "b", EXPLODING))
    client.stop_training_job(TrainingJobName="before-outage")
    client.stop_training_job(TrainingJobName="during-outage-1")
    time.sleep(max(0.0, 30 - (time.monotonic() - went_down)))
    pending = {e["id"] for _, e in outbox(server)} - {d["event"]["id"] for d in receiver.delivered()}
    assert len(pending) >= 6, pending
    receiver.start()
    wait_for(lambda: all_delivered(receiver, server, "/"), 30, "every event after the outage")
    assert_in_order_once(receiver.delivered())
    by_job: dict[str, list[tuple[str, str]]] = {}
    for d in receiver.delivered():
        by_job.setdefault(d["event"]["detail"]["TrainingJobName"], []).append(
            (d["event"]["detail"]["TrainingJobStatus"], d["event"]["detail"]["SecondaryStatus"]))
    for name in ("before-outage", "during-outage-1"):
        assert by_job[name][0] == ("InProgress", "Starting") and by_job[name][-1] == ("Stopped", "Stopped"), by_job
    assert by_job["during-outage-2"][0] == ("InProgress", "Starting")


@pytest.mark.slow
def test_sigkill_with_events_pending_then_restart_delivers_them_all_with_the_same_ids(
        make_server: Any, make_receiver: Any) -> None:
    server = make_server("--runtime", "fake", env=PATIENT)
    receiver = make_receiver("crash")
    receiver.mode("fail")
    subscribe_webhook(server, "crash", ALL, receiver.url(), "s")
    client = server.client()
    for name in ("crash-1", "crash-2"):
        client.create_training_job(**job_request(name, "b", EXPLODING))
    client.stop_training_job(TrainingJobName="crash-1")
    wait_for(lambda: len({r["headers"]["x-murphy-event-id"] for r in receiver.records()}) >= 1, 10,
             "a failed attempt")
    before = outbox(server)
    assert len(before) >= 4 and not receiver.delivered()
    server.kill()
    receiver.mode("ok")
    restarted = make_server("--runtime", "fake", env=PATIENT, data_dir=server.data_dir)
    wait_for(lambda: all_delivered(receiver, restarted, "/"), 30, "every event after the restart")
    delivered = receiver.delivered()
    assert_in_order_once(delivered)
    ids = {d["event"]["id"]: int(d["headers"]["x-murphy-event-seq"]) for d in delivered}
    assert all(ids.get(e["id"]) == seq for seq, e in before), "an event pending at the crash got lost or a new id"
    assert len(ids) == len(outbox(restarted))


def murphy(server: MurphyServer, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MURPHY_ENDPOINT": server.endpoint, "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "murphy.cli", "events", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.mark.slow
def test_cli_dead_letters_and_redrive_of_an_always_failing_receiver(make_server: Any, make_receiver: Any) -> None:
    server = make_server("--runtime", "fake", env={"MURPHY_EVENT_RETRY_BASE_S": "0.05", "MURPHY_EVENT_RETRY_CAP_S": "0.1",
                                                   "MURPHY_EVENT_MAX_ATTEMPTS": "3"})
    receiver = make_receiver("failing")
    receiver.mode("fail")
    made = murphy(server, "subscribe", "--name", "failing", "--webhook", receiver.url("/hook"), "--pattern",
                  json.dumps({"detail": {"TrainingJobName": [{"prefix": "dl-"}]}}))
    assert made.returncode == 0, made.stderr
    secret = re.search(r"secret:\s+(\S+)", made.stdout)
    assert secret and "shown once" in made.stdout
    listed = murphy(server, "list")
    assert "failing" in listed.stdout and receiver.url("/hook") in listed.stdout and secret.group(1) not in listed.stdout

    bad = murphy(server, "subscribe", "--name", "bad", "--webhook", "http://x/", "--pattern", '{"source":"x"}')
    assert bad.returncode == 1 and 'ValidationException: Event pattern field "source"' in bad.stderr
    assert "Traceback" not in bad.stderr
    dup = murphy(server, "subscribe", "--name", "failing", "--webhook", "https://x/")
    assert dup.returncode == 1 and "already exists" in dup.stderr
    not_url = murphy(server, "subscribe", "--name", "x", "--webhook", "localhost:80")
    assert not_url.returncode == 1 and "must be an http:// or https:// URL" in not_url.stderr
    assert murphy(server, "delete", "nope").stderr.startswith("murphy: ResourceNotFound:")

    client = server.client()
    client.create_training_job(**job_request("dl-job", "b", EXPLODING))
    client.create_training_job(**job_request("other-job", "b", EXPLODING))
    client.stop_training_job(TrainingJobName="dl-job")
    watch(client, "dl-job", timeout=30)
    wanted = [(seq, e) for seq, e in outbox(server) if e["detail"]["TrainingJobName"] == "dl-job"]
    letters = wait_for(lambda: len(d := rest(server, "GET", "/v1/dead-letters")["dead_letters"]) == len(wanted) and d,
                       30, "every dl-job event dead-lettered")
    assert [d["seq"] for d in letters] == [seq for seq, _ in wanted] and all(d["attempts"] == 3 for d in letters)
    shown = murphy(server, "dead-letters", "failing")
    assert shown.returncode == 0, shown.stderr
    assert "dl-job" in shown.stdout and "HTTP 500" in shown.stdout and "other-job" not in shown.stdout
    assert json.loads(murphy(server, "dead-letters", "--json").stdout)[0]["event_id"] == wanted[0][1]["id"]

    receiver.mode("ok")
    one = murphy(server, "redrive", "failing", "--seq", str(wanted[0][0]))
    assert one.returncode == 0 and "re-queued 1 event(s)" in one.stdout
    wait_for(lambda: len(receiver.delivered()) == 1, 10, "the one redriven event")
    rest_of_them = murphy(server, "redrive", "failing")
    assert f"re-queued {len(wanted) - 1} event(s)" in rest_of_them.stdout
    # Queued letters leave the listing before they are delivered: wait for the deliveries.
    assert not rest(server, "GET", "/v1/dead-letters")["dead_letters"]
    wait_for(lambda: len(receiver.delivered()) == len(wanted), 10, "every redriven event")
    delivered = receiver.delivered()
    assert [d["event"]["id"] for d in delivered] == [e["id"] for _, e in wanted]
    assert all(verify_signature(secret.group(1), d["body"].encode(), d["headers"]["x-murphy-signature-256"])
               for d in delivered)
    assert json.loads(murphy(server, "dead-letters", "--json").stdout) == []

    tail = murphy(server, "tail", "--last-event-id", "0", "--count", "2", "--pattern",
                  '{"detail":{"TrainingJobName":["other-job"]}}', timeout=30)
    assert tail.returncode == 0, tail.stderr
    lines = tail.stdout.splitlines()
    assert len(lines) == 2 and all("other-job" in ln for ln in lines) and "Downloading" in lines[1]
    assert murphy(server, "delete", "failing").stdout.strip() == "deleted subscription failing"
    assert "event subscriptions (0)" in murphy(server, "list").stdout
