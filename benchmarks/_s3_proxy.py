"""A loopback reverse proxy in front of an S3 server: counts requests by kind and can add latency.

Both readers (murphy's and smdebug's, in their own processes) are pointed at the proxy's URL
instead of the server's, so it sees every request either library makes, with the same
classification for both: LIST (a GET on the bucket with ``list-type``/``prefix``), GET, HEAD,
PUT, other. ``delay_s`` is added before each request is forwarded, as a network round trip
would be (requests in flight at once each wait, in parallel, as they would on a real network).

A reader process can read the counters between its phases: ``GET <proxy>/__proxy_stats`` answers
the counts so far as JSON (never forwarded). Headers are passed through unchanged, so SigV4
signatures made for the proxy's host still verify at a server that checks them.

usage (in a benchmark): ``with S3Proxy(upstream, delay_s=0.02) as proxy: ... proxy.url ...``
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

STATS_PATH = "/__proxy_stats"
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def classify(method: str, target: str) -> str:
    """LIST / GET / HEAD / PUT / POST / DELETE for one S3 request (path-style addressing)."""
    parts = urlsplit(target)
    query = parse_qs(parts.query, keep_blank_values=True)
    path = parts.path.strip("/")
    if method == "GET" and ("list-type" in query or ("/" not in path and ("prefix" in query or "delimiter" in query))):
        return "LIST"
    return method


def stats(url: str) -> dict[str, int]:
    """The counters of the proxy at ``url`` (for reader processes; stdlib only)."""
    import urllib.request

    with urllib.request.urlopen(url.rstrip("/") + STATS_PATH, timeout=10) as resp:
        data: dict[str, int] = json.loads(resp.read())
    return data


class _Server(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: a reader opening 16 connections at once (murphy's
    # batch GET) overflows it and the kernel drops SYNs, which costs a 1 s retransmit. A real S3
    # endpoint has no such limit, so neither may the proxy.
    request_queue_size = 256


class S3Proxy:
    """A threaded reverse proxy on 127.0.0.1 (one upstream connection per proxy thread)."""

    def __init__(self, upstream: str, delay_s: float = 0.0) -> None:
        up = urlsplit(upstream)
        self._host, self._port = up.hostname or "127.0.0.1", up.port or 80
        self.delay_s = delay_s
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def __enter__(self) -> S3Proxy:
        self._thread.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _upstream(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(self._host, self._port, timeout=120)
        return conn

    def _forward(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        for attempt in (0, 1):
            conn = self._upstream()
            try:
                conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
                for k, v in headers:
                    conn.putheader(k, v)
                conn.endheaders(body if body else None)
                resp = conn.getresponse()
                data = resp.read()
                return resp.status, [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP], data
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _any(self) -> None:
                if self.path == STATS_PATH:
                    body = json.dumps(proxy.snapshot()).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with proxy._lock:
                    proxy.counts[classify(self.command, self.path)] += 1
                if proxy.delay_s:
                    time.sleep(proxy.delay_s)
                headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP]
                status, rheaders, data = proxy._forward(self.command, self.path, headers, body)
                self.send_response_only(status)
                for k, v in rheaders:
                    if k.lower() != "content-length":
                        self.send_header(k, v)
                # HEAD answers carry the object's length, not a body's.
                declared = {k.lower(): v for k, v in rheaders}.get("content-length", "0")
                self.send_header("Content-Length", declared if self.command == "HEAD" else str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _any

        return Handler
