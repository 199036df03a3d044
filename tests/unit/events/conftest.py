"""Fixtures for the event tests: real webhook receivers on 127.0.0.1 (eventkit.Receiver),
settings with short timeouts, an in-memory store, and buses that are always closed."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from eventkit import Receiver, handler

from murphy.events.bus import EventBus
from murphy.jobs.events import events_for
from murphy.settings import Settings
from murphy.store import JobStore, open_job_store


@pytest.fixture
def receiver_factory() -> Iterator[Callable[..., Receiver]]:
    servers: list[tuple[http.server.ThreadingHTTPServer, Receiver]] = []

    def make(mode: str = "ok", fail_first: int = 0) -> Receiver:
        rx = Receiver(mode=mode, fail_first=fail_first)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler(rx))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        rx.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        servers.append((server, rx))
        return rx

    yield make
    for server, rx in servers:
        rx.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path, event_delivery_timeout_s=0.5, event_retry_base_s=0.01,
                    event_retry_cap_s=0.05, event_max_attempts=3, event_poll_interval_s=0.2)


@pytest.fixture
def make_bus(settings: Settings) -> Iterator[Callable[..., EventBus]]:
    """``make_bus(store, **settings_overrides)``: a bus on ``store``, woken by its commits and
    closed at teardown."""
    buses: list[EventBus] = []

    def make(store: JobStore, **overrides: Any) -> EventBus:
        bus = EventBus(store, settings.model_copy(update=overrides) if overrides else settings)
        store.set_event_builder(events_for, on_appended=lambda _seq: bus.wake())
        buses.append(bus)
        return bus

    yield make
    for bus in buses:
        bus.close()


@pytest.fixture
def store() -> Iterator[JobStore]:
    s = open_job_store("memory://")
    yield s
    s.close()
