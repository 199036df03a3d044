"""Helpers of the events API tests: the app with a real EventBus served by a real uvicorn on
127.0.0.1 (in a thread), and a webhook receiver (a stdlib HTTP server in a thread)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import uvicorn
from apihelp import ACCOUNT, REGION, Plane, make_plane, training_request
from fastapi import FastAPI

from murphy.api.app import create_app
from murphy.core.ports import free_port
from murphy.events.bus import EventBus
from murphy.jobs.events import events_for


def wait_for(check: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class ServerThread:
    """uvicorn serving ``app`` on 127.0.0.1:``port`` until stop()."""

    def __init__(self, app: FastAPI, port: int) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                                timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started, what="uvicorn to start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@dataclass
class LiveEvents:
    plane: Plane
    bus: EventBus
    app: FastAPI
    port: int
    server: ServerThread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.server = ServerThread(self.app, self.port)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def create_job(self, name: str) -> None:
        """CreateTrainingJob (straight to the service, so it works while the server is down):
        one event, InProgress/Starting."""
        self.plane.service.create_training_job(training_request(name), account=ACCOUNT, region=REGION)


def live_events(tmp_path: Path, **settings: Any) -> LiveEvents:
    plane = make_plane(tmp_path)
    bus_settings = plane.settings.model_copy(update={"event_retry_base_s": 0.01, "event_retry_cap_s": 0.05,
                                                     "event_max_attempts": 2, **settings})
    bus = EventBus(plane.store, bus_settings)
    plane.store.set_event_builder(events_for, on_appended=lambda _seq: bus.wake())
    return LiveEvents(plane, bus, create_app(plane.service, plane.settings, bus), free_port())


@dataclass
class Receiver:
    """A webhook receiver: answers ``status`` (204 unless a test changes it), records bodies."""

    status: int = 204
    bodies: list[dict[str, Any]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = receiver.status
                if 200 <= status < 300:
                    receiver.bodies.append(json.loads(body))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
