"""Issue 18 §2: where events may go. Each refused target is tried: plain http off loopback, the
metadata service (IPv4 and AWS's IPv6), the link-local range, the murphy server itself, and a
name that resolves to a refused address at delivery time; redirects are not followed; an
allowlist opens exactly what it names."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from murphy.events.dispatcher import make_target
from murphy.events.targets import TargetRefused, check_peer, check_url
from murphy.exceptions import DeliveryError
from murphy.settings import Settings


def settings(tmp_path: Path, **extra: Any) -> Settings:
    return Settings(**{"data_dir": tmp_path, "port": 8080, **extra})


@pytest.mark.parametrize(("url", "why"), [
    ("http://hooks.example.com/x", "must be https"),
    ("http://10.0.0.5/x", "must be https"),
    ("https://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("https://169.254.10.1/", "link-local"),
    ("https://[fd00:ec2::254]/", "link-local"),
    ("https://[fe80::1]/", "link-local"),
    ("https://[::ffff:169.254.169.254]/", "link-local"),
    ("http://127.0.0.1:8080/v1/subscriptions", "this murphy server itself"),
    ("http://localhost:8080/", "this murphy server itself"),
    ("https://[::1]:8080/", "this murphy server itself"),
    ("https://0.0.0.0/", "not a receiver"),
])
def test_refused_targets(tmp_path: Path, url: str, why: str) -> None:
    with pytest.raises(TargetRefused, match=why):
        check_url("target.url", url, settings(tmp_path))


@pytest.mark.parametrize("url", [
    "https://hooks.example.com/x",   # does not resolve here: checked again when a delivery connects
    "https://10.0.0.5/x",
    "http://127.0.0.1:9999/hook",    # development receiver on this machine
    "http://localhost:5000/",
    "https://[::1]:9999/",
])
def test_allowed_targets(tmp_path: Path, url: str) -> None:
    check_url("target.url", url, settings(tmp_path))


def test_the_allowlist_opens_what_it_names(tmp_path: Path) -> None:
    s = settings(tmp_path, event_target_allowlist=("169.254.0.0/16", "hooks.internal"))
    check_url("target.url", "http://169.254.169.254/", s)
    check_url("target.url", "http://hooks.internal/x", s)
    with pytest.raises(TargetRefused):
        check_url("target.url", "https://[fd00:ec2::254]/", s)
    with pytest.raises(TargetRefused):
        check_url("target.url", "http://hooks.example.com/", s)


def test_the_bus_refuses_at_subscription_time(tmp_path: Path) -> None:
    from murphy.events.bus import EventBus
    from murphy.store.memory import InMemoryJobStore

    bus = EventBus(InMemoryJobStore(), settings(tmp_path))
    for target in ({"type": "webhook", "url": "http://169.254.169.254/"},
                   {"type": "eventbridge", "endpoint_url": "http://169.254.169.254/"},
                   {"type": "webhook", "url": "http://example.com/hook"}):
        with pytest.raises(TargetRefused):
            bus.create_subscription("s", {"source": ["aws.sagemaker"]}, target)


class _Receiver(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        _Receiver.hits.append(self.path)
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
        else:
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[int]:
    _Receiver.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


EVENT = {"id": "e1", "source": "aws.sagemaker", "detail-type": "x", "detail": {}, "account": "123456789012"}


def test_redirects_are_not_followed(tmp_path: Path, receiver: int) -> None:
    s = settings(tmp_path)
    target = make_target({"type": "webhook", "url": f"http://127.0.0.1:{receiver}/redirect", "secret": "s"}, s)
    with pytest.raises(DeliveryError, match="HTTP 302"):
        target.deliver(1, EVENT)
    assert _Receiver.hits == ["/redirect"]  # one request: the Location was not fetched
    target.close()


def test_the_address_connected_to_is_checked_on_every_connection(tmp_path: Path, receiver: int) -> None:
    s = settings(tmp_path)
    ok = make_target({"type": "webhook", "url": f"http://127.0.0.1:{receiver}/ok", "secret": "s"}, s)
    ok.deliver(1, EVENT)
    ok.close()
    # A murphy server on the receiver's port: the same URL now points at the server itself.
    itself = make_target({"type": "webhook", "url": f"http://127.0.0.1:{receiver}/ok", "secret": "s"},
                         settings(tmp_path, port=receiver))
    with pytest.raises(DeliveryError, match="this murphy server itself"):
        itself.deliver(2, EVENT)
    assert _Receiver.hits == ["/ok"]
    # A name that resolved to an allowed address at subscription time and to a refused one now.
    with pytest.raises(TargetRefused, match="link-local"):
        check_peer("https://hooks.example.com/x", "169.254.169.254", s)
