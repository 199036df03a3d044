"""Helpers of the event tests: a real webhook receiver on 127.0.0.1 and job writes."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from murphy.jobs.model import JobRecord, SecondaryStatus
from murphy.store import JobStore


@dataclass
class Hit:
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def event(self) -> dict[str, Any]:
        return dict(json.loads(self.body))


@dataclass
class Receiver:
    """A webhook receiver. ``mode``: "ok", "fail" (500), "hang" (never answers), "close" (drops
    the connection), or ``fail_first`` failures before answering 200. ``hits`` are the
    requests answered 200, ``attempts`` every request."""

    url: str = ""
    mode: str = "ok"
    fail_first: int = 0
    hits: list[Hit] = field(default_factory=list)
    attempts: list[Hit] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def events(self) -> list[dict[str, Any]]:
        with self.lock:
            return [h.event for h in self.hits]

    def wait_for(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        wait_until(lambda: len(self.hits) >= count, timeout, f"{count} deliveries to {self.url}")
        return self.events()


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def handler(rx: Receiver) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver would

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            hit = Hit(dict(self.headers.items()), body, time.monotonic())
            with rx.lock:
                rx.attempts.append(hit)
                failing = rx.fail_first > 0
                rx.fail_first -= 1 if failing else 0
            if rx.mode == "hang":
                rx.release.wait(30)
                return
            if rx.mode == "close":
                self.close_connection = True
                return
            status = 500 if failing or rx.mode == "fail" else 200
            if status == 200:
                with rx.lock:
                    rx.hits.append(hit)
            reply = b"ok" if status == 200 else b"receiver broke"
            self.send_response(status)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def new_job(store: JobStore, name: str) -> JobRecord:
    return store.create(JobRecord.new(
        name, f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}", "123456789012",
        "us-east-1", {}, now=1000.0))


def advance(store: JobStore, name: str, to: SecondaryStatus) -> JobRecord:
    rec = store.get(name)
    rec.transition(to, f"now {to.value}")
    return store.update(rec)
