"""``GET /v1/events/stream`` (Server-Sent Events) and the client ``murphy.events.subscribe`` on it,
against a real uvicorn serving the app with a real EventBus."""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from eventshelp import LiveEvents, live_events, wait_for

from murphy.events import subscribe
from murphy.events.client import parse_sse

DETAIL_TYPE = "SageMaker Training Job State Change"


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveEvents]:
    live = live_events(tmp_path)
    live.bus.start()
    live.start()
    try:
        yield live
    finally:
        live.stop()
        live.bus.close()


class Stream:
    """An open stream read line by line on a thread (so a test can time out instead of hang)."""

    def __init__(self, live: LiveEvents, query: str = "", headers: dict[str, str] | None = None) -> None:
        self.blocks: list[tuple[str | None, str, str | None]] = []
        self.raw: list[str] = []
        self._conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=30)
        self._conn.request("GET", f"/v1/events/stream{query}", headers=headers or {})
        self._sock = self._conn.sock
        self.response = self._conn.getresponse()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        def lines() -> Iterator[str]:
            while line := self.response.readline():
                self.raw.append(line.decode().rstrip("\r\n"))
                yield self.raw[-1]

        with contextlib.suppress(OSError, ValueError, http.client.HTTPException):
            for block in parse_sse(lines()):
                self.blocks.append(block)

    def events(self, n: int, timeout: float = 10.0) -> list[tuple[int, dict[str, Any]]]:
        def got() -> list[tuple[int, dict[str, Any]]]:
            out = [(int(i or 0), json.loads(d)) for i, kind, d in self.blocks if d is not None and kind == DETAIL_TYPE]
            return out if len(out) >= n else []

        return wait_for(got, timeout, what=f"{n} events (have {self.blocks})")  # type: ignore[no-any-return]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(5)
        self._conn.close()


def names(events: list[tuple[int, dict[str, Any]]]) -> list[str]:
    return [e["detail"]["TrainingJobName"] for _, e in events]


def test_replays_from_last_event_id_then_tails(live: LiveEvents) -> None:
    live.create_job("job-1")
    live.create_job("job-2")
    s = Stream(live, headers={"Last-Event-ID": "0"})
    try:
        assert s.response.status == 200
        assert s.response.getheader("content-type", "").startswith("text/event-stream")
        assert s.response.getheader("cache-control") == "no-cache"
        got = s.events(2)
        assert [seq for seq, _ in got] == [1, 2] and names(got) == ["job-1", "job-2"]
        assert got[0][1]["detail-type"] == DETAIL_TYPE and got[0][1]["source"] == "aws.sagemaker"
        live.create_job("job-3")
        got = s.events(3)
        assert got[2][0] == 3 and names(got)[2] == "job-3"
        # On the wire: "id: <seq>", "event: <detail-type>", "data: <one-line JSON>".
        assert s.raw[s.raw.index("id: 3"):s.raw.index("id: 3") + 2] == ["id: 3", f"event: {DETAIL_TYPE}"]
    finally:
        s.close()
    resumed = Stream(live, headers={"Last-Event-ID": "2"})
    by_query = Stream(live, query="?last_event_id=1")
    try:
        assert [seq for seq, _ in resumed.events(1)] == [3]
        assert [seq for seq, _ in by_query.events(2)] == [2, 3]
    finally:
        resumed.close()
        by_query.close()


def test_without_last_event_id_the_stream_starts_now(live: LiveEvents) -> None:
    live.create_job("before")
    s = Stream(live)
    try:
        wait_for(lambda: s.raw, what="the stream's first comment")
        assert s.raw[0] == ": murphy event stream from seq 1"
        live.create_job("after")
        assert names(s.events(1)) == ["after"]
    finally:
        s.close()


def test_pattern_in_the_query_filters(live: LiveEvents) -> None:
    pattern = json.dumps({"detail": {"TrainingJobName": [{"prefix": "keep"}]}})
    s = Stream(live, query="?" + httpx.QueryParams({"pattern": pattern, "last_event_id": "0"}).__str__())
    try:
        for name in ("drop-1", "keep-1", "drop-2", "keep-2"):
            live.create_job(name)
        got = s.events(2)
        assert names(got) == ["keep-1", "keep-2"] and [seq for seq, _ in got] == [2, 4]
    finally:
        s.close()


@pytest.mark.parametrize(("query", "headers", "message"), [
    ("?pattern=%7Bnope", {}, "The pattern is not valid JSON"),
    ("?pattern=" + httpx.QueryParams({"p": '{"source":"aws.sagemaker"}'})["p"], {}, 'Event pattern field "source"'),
    ("", {"Last-Event-ID": "abc"}, "Last-Event-ID must be an event sequence number"),
    ("?last_event_id=-4", {}, "Last-Event-ID must be >= 0"),
])
def test_bad_stream_requests_are_400(live: LiveEvents, query: str, headers: dict[str, str], message: str) -> None:
    r = httpx.get(f"{live.endpoint}/v1/events/stream{query}", headers=headers, timeout=5)
    assert r.status_code == 400 and message in r.json()["message"], r.text


def test_heartbeats_and_the_cursor_past_filtered_events(live: LiveEvents) -> None:
    live.app.state.events.heartbeat_s = 0.3
    s = Stream(live, query="?" + str(httpx.QueryParams({"pattern": '{"detail":{"TrainingJobName":["never"]}}'})))
    try:
        wait_for(lambda: ": keep-alive" in s.raw, 5, "a heartbeat")
        live.create_job("filtered-out")
        # Nothing is dispatched, but the next heartbeat moves the client's Last-Event-ID to 1.
        wait_for(lambda: "id: 1" in s.raw, 5, "an id-only heartbeat")
        assert all(d is None for _, _, d in s.blocks)
        assert (("1", "message", None)) in s.blocks
    finally:
        s.close()


def test_a_client_that_disconnects_frees_its_stream(live: LiveEvents) -> None:
    routes = live.app.state.events
    clients = []
    for _ in range(3):  # clients that vanish: their sockets close mid-stream
        sock = socket.create_connection(("127.0.0.1", live.port), timeout=5)
        sock.sendall(b"GET /v1/events/stream HTTP/1.1\r\nHost: murphy\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK")
        clients.append(sock)
    wait_for(lambda: routes.active_streams == 3, what="three open streams")
    for sock in clients:
        sock.close()
    wait_for(lambda: routes.active_streams == 0, 2, "the streams to be released")
    # The server still serves new streams and events.
    s = Stream(live)
    try:
        wait_for(lambda: s.raw, what="a new stream")
        live.create_job("later")
        assert names(s.events(1)) == ["later"]
    finally:
        s.close()


# ---- the client -----------------------------------------------------------------------------------


def test_subscribe_delivers_in_order_and_resumes_after_the_server_comes_back(live: LiveEvents) -> None:
    got: list[dict[str, Any]] = []
    sub = subscribe({"detail": {"TrainingJobName": [{"prefix": "job-"}]}}, got.append, live.endpoint,
                    backoff_base_s=0.05, backoff_cap_s=0.2)
    try:
        assert sub.wait_connected(5)
        live.create_job("job-1")
        live.create_job("other")
        live.create_job("job-2")
        wait_for(lambda: len(got) == 2, what="two events")
        assert [e["detail"]["TrainingJobName"] for e in got] == ["job-1", "job-2"]
        assert sub.last_event_id == 3
        live.stop()
        live.create_job("job-3")  # while the server is down
        live.create_job("job-4")
        live.start()
        wait_for(lambda: len(got) == 4, what="the missed events after the reconnect")
        assert [e["detail"]["TrainingJobName"] for e in got] == ["job-1", "job-2", "job-3", "job-4"]
        assert len({e["id"] for e in got}) == 4
    finally:
        sub.close()
    assert not sub.running


def test_a_subscription_that_saw_no_event_yet_still_resumes_without_a_gap(live: LiveEvents) -> None:
    live.create_job("old")
    got: list[str] = []
    with subscribe(None, lambda e: got.append(e["detail"]["TrainingJobName"]), live.endpoint,
                   backoff_base_s=0.05, backoff_cap_s=0.2) as sub:
        assert sub.wait_connected(5)
        wait_for(lambda: sub.last_event_id == 1, what="the stream's starting position")
        live.stop()
        live.create_job("while-down")
        live.start()
        wait_for(lambda: got, what="the event created while the server was down")
        assert got == ["while-down"]


def test_a_callback_that_raises_is_logged_and_delivery_goes_on(live: LiveEvents,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    got: list[str] = []

    def callback(event: dict[str, Any]) -> None:
        name = event["detail"]["TrainingJobName"]
        if name == "bad":
            raise RuntimeError("boom")
        got.append(name)

    live.create_job("first")
    with caplog.at_level(logging.ERROR, logger="murphy.events.client"), \
            subscribe(None, callback, live.endpoint, last_event_id=0) as sub:
        wait_for(lambda: got == ["first"], what="the replayed event")
        live.create_job("bad")
        live.create_job("good")
        wait_for(lambda: got == ["first", "good"], what="the event after the failing one")
        assert sub.last_event_id == 3
    assert any("the event callback raised" in r.getMessage() for r in caplog.records)


def test_subscribe_with_an_invalid_pattern_stops_with_the_servers_reason(live: LiveEvents) -> None:
    sub = subscribe({"source": "not-a-list"}, lambda e: None, live.endpoint)
    wait_for(lambda: not sub.running, what="the subscription to give up")
    assert sub.error is not None and "(400)" in str(sub.error) and '"source"' in str(sub.error)
    sub.close()
