"""``subscribe(pattern, callback)``: a murphy server's events, delivered to a Python callback.

Built on ``GET /v1/events/stream`` (Server-Sent Events) with the standard library only, so it
works wherever murphy's client side is installed. A background thread reads the stream, calls
``callback(event)`` in order, and reconnects on its own (backoff with jitter), resuming with
``Last-Event-ID`` so nothing is missed: delivery is at least once, in outbox order.

    from murphy.events import subscribe

    def on_event(event):
        print(event["detail"]["TrainingJobName"], event["detail"]["TrainingJobStatus"])

    sub = subscribe({"detail": {"TrainingJobStatus": ["Stopped", "Failed"]}}, on_event,
                    endpoint="http://127.0.0.1:8080")
    ...
    sub.close()
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import random
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

from murphy.events.signing import query_string, sign

log = logging.getLogger("murphy.events.client")

DEFAULT_ENDPOINT = "http://127.0.0.1:8080"
Callback = Callable[[dict[str, Any]], None]


class StreamError(Exception):
    """The server refused the stream for good (e.g. 400: the pattern is invalid)."""


def _endpoint(endpoint: str | None) -> urllib.parse.SplitResult:
    url = urllib.parse.urlsplit(endpoint or os.environ.get("MURPHY_ENDPOINT") or DEFAULT_ENDPOINT)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"endpoint must be an http(s) URL, not {endpoint!r}")
    return url


def parse_sse(lines: Iterator[str]) -> Iterator[tuple[str | None, str, str | None]]:
    """Server-Sent Events blocks as ``(id, event, data)`` (WHATWG parsing rules); ``data`` is None
    for a block that only moves the id (or only carries a ``retry``/comment and no id)."""
    event_id: str | None = None
    data: list[str] = []
    kind, has_field = "", False
    for line in lines:
        if line == "":
            if has_field:
                yield event_id, kind or "message", "\n".join(data) if data else None
            kind, data, has_field = "", [], False
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id" and "\0" not in value:
            event_id, has_field = value, True
        elif name == "event":
            kind, has_field = value, True
        elif name == "data":
            data.append(value)
            has_field = True


class StreamSubscription:
    """A running subscription: ``close()`` stops it; ``last_event_id`` is where a new one resumes."""

    def __init__(self, pattern: dict[str, Any] | None, callback: Callback, endpoint: str | None = None, *,
                 last_event_id: int | None = None, backoff_base_s: float = 0.5, backoff_cap_s: float = 30.0,
                 read_timeout_s: float = 60.0) -> None:
        self._url = _endpoint(endpoint)
        query = {"pattern": json.dumps(pattern, separators=(",", ":"))} if pattern else {}
        self._path = f"{self._url.path.rstrip('/')}/v1/events/stream" + (f"?{query_string(query)}" if query else "")
        self._callback = callback
        self._last: int | None = last_event_id
        self._backoff = (backoff_base_s, backoff_cap_s)
        self._read_timeout = read_timeout_s
        self._stop = threading.Event()
        self._connected = threading.Event()
        self._conn: http.client.HTTPConnection | None = None
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        #: The error that ended the subscription for good (None while it runs or after close()).
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name="murphy-events-subscribe", daemon=True)
        self._thread.start()

    @property
    def last_event_id(self) -> int | None:
        """Where a reconnect resumes: the seq of the last event handled, or where the stream
        started (None until the first connection)."""
        return self._last

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def wait_connected(self, timeout: float | None = None) -> bool:
        """Block until the stream is open (events created after this are received)."""
        return self._connected.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._lock:
            sock = self._sock
        if sock is not None:
            # Unblocks the reader thread's recv().
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def __enter__(self) -> StreamSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the reader thread ----------------------------------------------------------------------

    def _connect(self) -> http.client.HTTPResponse:
        cls = http.client.HTTPSConnection if self._url.scheme == "https" else http.client.HTTPConnection
        conn = cls(self._url.hostname or "", self._url.port, timeout=self._read_timeout)
        with self._lock:
            self._conn = conn
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self._last is not None:
            headers["Last-Event-ID"] = str(self._last)
        base = f"{self._url.scheme}://{self._url.netloc}"
        conn.request("GET", self._path, headers=sign("GET", base + self._path, headers))
        with self._lock:
            # The response reads this socket even if the connection object lets go of it.
            self._sock = conn.sock
        if self._stop.is_set():
            raise ConnectionAbortedError("closed")
        response = conn.getresponse()
        if response.status != 200:
            body = response.read(4096).decode(errors="replace")
            try:
                message = json.loads(body).get("message", body)
            except ValueError:
                message = body
            if 400 <= response.status < 500:
                raise StreamError(f"the server refused the event stream ({response.status}): {message}")
            raise ConnectionError(f"event stream answered {response.status}: {message}")
        return response

    def _lines(self, response: http.client.HTTPResponse) -> Iterator[str]:
        while not self._stop.is_set():
            raw = response.readline()
            if not raw:
                return
            yield raw.decode("utf-8", errors="replace").rstrip("\r\n")

    def _deliver(self, seq: str | None, data: str | None) -> None:
        event = None
        if data is not None:
            try:
                event = json.loads(data)
            except ValueError:
                log.warning("skipping an event that is not JSON (id %s): %.200s", seq, data)
        if event is not None:
            try:
                self._callback(event)
            except Exception:
                log.exception("the event callback raised (event id %s, seq %s); carrying on",
                              event.get("id") if isinstance(event, dict) else None, seq)
        if seq is not None and seq.isdigit():
            self._last = int(seq)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                response = self._connect()
                self._connected.set()
                failures = 0
                for seq, _kind, data in parse_sse(self._lines(response)):
                    if self._stop.is_set():
                        break
                    self._deliver(seq, data)
                if not self._stop.is_set():
                    log.info("event stream ended; reconnecting after seq %s", self._last)
            except StreamError as e:
                log.error("%s", e)
                self.error = e
                return
            except (OSError, http.client.HTTPException) as e:
                if self._stop.is_set():
                    break
                failures += 1
                log.warning("event stream interrupted (%s); reconnecting after seq %s", e, self._last)
            finally:
                self._connected.clear()
                with self._lock:
                    conn, self._conn, self._sock = self._conn, None, None
                if conn is not None:
                    conn.close()
            base, cap = self._backoff
            # Full jitter: reconnecting clients do not arrive at the server in lockstep.
            delay = random.uniform(0, min(cap, base * 2 ** min(failures, 16))) if failures else 0.05
            self._stop.wait(delay)


def subscribe(pattern: dict[str, Any] | None, callback: Callback, endpoint: str | None = None, *,
              last_event_id: int | None = None, **options: Any) -> StreamSubscription:
    """Call ``callback(event)`` for every event matching ``pattern`` (an EventBridge event pattern;
    None = every event), from a background thread, in order, at least once.

    ``endpoint``: the server (default ``$MURPHY_ENDPOINT`` or http://127.0.0.1:8080).
    ``last_event_id``: resume after this sequence number (0 = replay everything the server kept);
    None starts at the events created from now on. ``options``: ``backoff_base_s``,
    ``backoff_cap_s``, ``read_timeout_s``.
    """
    return StreamSubscription(pattern, callback, endpoint, last_event_id=last_event_id, **options)
