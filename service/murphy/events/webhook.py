"""Webhook delivery: an HTTP(S) POST of the event JSON, signed with the subscription's secret.

Headers: ``Content-Type: application/json``, ``X-Murphy-Event-Id`` (the envelope's id, the
idempotency key), ``X-Murphy-Event-Seq`` (its outbox position) and ``X-Murphy-Signature-256:
sha256=<hex HMAC-SHA256 of the exact body bytes>``. A 2xx answer is a delivery; anything else,
a timeout or a dropped connection is a failed attempt (the dispatcher retries).

Standard library only (``http.client``): one persistent connection per subscription keeps the
latency of a healthy receiver to a round trip; the socket timeout bounds connect and each read.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import socket
import ssl
import urllib.parse
from collections.abc import Callable
from typing import Any

from murphy.exceptions import DeliveryError

SIGNATURE_HEADER = "X-Murphy-Signature-256"
EVENT_ID_HEADER = "X-Murphy-Event-Id"
EVENT_SEQ_HEADER = "X-Murphy-Event-Seq"
USER_AGENT = "murphy-events/1"
#: Of an error response, how much body goes into the dead letter's ``last_error``.
_ERROR_BODY_CHARS = 200


def sign(secret: str, body: bytes) -> str:
    """``"sha256=<hex>"``: HMAC-SHA256 of ``body`` keyed with ``secret`` (UTF-8)."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verify_signature(secret: str, body: bytes, header: str | None) -> bool:
    """What a receiver does: recompute the signature over the raw body, compare in constant
    time."""
    return header is not None and hmac.compare_digest(sign(secret, body), header)


def encode(event: dict[str, Any]) -> bytes:
    """The exact bytes sent (and signed): compact JSON, UTF-8."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class WebhookTarget:
    """POSTs events to one URL over a connection it keeps open between deliveries."""

    def __init__(self, url: str, secret: str, timeout: float,
                 check_peer: Callable[[str, str], None] | None = None) -> None:
        """``check_peer(url, address)``: raises if the address connected to is not allowed
        (:func:`murphy.events.targets.check_peer`)."""
        parts = urllib.parse.urlsplit(url)
        self._url = url
        self._check_peer = check_peer
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._secret = secret
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def deliver(self, seq: int, event: dict[str, Any]) -> None:
        """One attempt; raises :class:`DeliveryError` unless the receiver answered 2xx."""
        body = encode(event)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            EVENT_ID_HEADER: str(event.get("id", "")),
            EVENT_SEQ_HEADER: str(seq),
            SIGNATURE_HEADER: sign(self._secret, body),
        }
        reused = self._conn is not None
        try:
            status, text = self._post(body, headers)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
            if not reused:
                raise DeliveryError(f"connection lost: {e}") from e
            # The receiver closed the kept-alive connection while idle: once more, fresh.
            status, text = self._attempt_fresh(body, headers)
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise DeliveryError(_describe(e, self._timeout)) from e
        if not 200 <= status < 300:
            raise DeliveryError(f"HTTP {status}: {text[:_ERROR_BODY_CHARS]}".rstrip(": "))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _attempt_fresh(self, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
        self.close()
        try:
            return self._post(body, headers)
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise DeliveryError(_describe(e, self._timeout)) from e

    def _post(self, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
        if self._conn is None:
            self._conn = self._connect()
        try:
            self._conn.request("POST", self._path, body=body, headers=headers)
            response = self._conn.getresponse()
            text = response.read().decode("utf-8", "replace")
        except BaseException:
            self.close()
            raise
        if response.will_close:
            self.close()
        return response.status, text

    def _connect(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        conn.connect()
        if self._check_peer is not None:
            try:
                self._check_peer(self._url, str(conn.sock.getpeername()[0]))
            except Exception as e:
                conn.close()
                raise DeliveryError(str(e)) from e
        # http.client writes the headers and the body in two sends: without TCP_NODELAY,
        # Nagle's algorithm holds the body back until the receiver's (delayed) ACK arrives.
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn


def _describe(e: BaseException, timeout: float) -> str:
    if isinstance(e, (socket.timeout, TimeoutError)):
        return f"no answer within {timeout:g} s"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
