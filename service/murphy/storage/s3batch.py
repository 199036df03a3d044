"""Many small GETs at once over a few kept-alive sockets, driven by one thread.

Why: a trial opens by reading one small index object per step. One request at a time through
``http.client`` costs ~0.5 ms of client CPU (header parsing, a thread hand-off per request when
threads add concurrency) on top of the round trip. Here one thread drives up to ``connections``
sockets through a selector and reads the answers with a minimal parser: ~0.1-0.15 ms per object,
round trips overlapped. ``depth`` > 1 also pipelines requests on each socket (HTTP/1.1: answers
come back in order, RFC 9112 §9.3.2); it is off by default, since SeaweedFS serves one socket's
requests one after another and measured no faster than more sockets.

This module only moves bytes. Whatever it cannot handle exactly (no ``Content-Length``, chunked
or 1xx answers, a request that failed ``ATTEMPTS`` times on the wire) comes back with status 0,
and the caller repeats that one request on its single-request path, which retries, falls back to
boto3 and maps errors as before. A server that drops a socket with several requests in flight
(one that will not pipeline) puts the batch at one request per socket; requests cut off by a
``Connection: close`` are sent again on a new socket, not counted as failures. Nothing waits more
than ``timeout`` for sockets that make no progress, so a batch always ends.
"""

from __future__ import annotations

import selectors
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator

ATTEMPTS = 4  # tries of one request on the wire before it is handed back with status 0
_BACKOFF_S = 0.05
_MAX_HEAD = 64 * 1024
_RECV = 256 * 1024
UNSURE = 0


class _Unusable(Exception):
    """An answer this parser does not handle; the connection's state is unknown after it."""


class _Conn:
    """One socket, its receive buffer and the request indices sent on it, oldest first."""

    __slots__ = ("answered", "buf", "inflight", "reused", "sock")

    def __init__(self, sock: socket.socket, reused: bool) -> None:
        self.sock = sock
        self.reused = reused
        self.buf = bytearray()
        self.inflight: deque[int] = deque()
        self.answered = 0


def parse_response(buf: bytearray) -> tuple[int, bytes, bool] | None:
    """Take one complete response off the front of ``buf``: (status, body, server closes).

    None if it is not complete yet; :class:`_Unusable` for what a minimal parser cannot frame.
    """
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > _MAX_HEAD:
            raise _Unusable("response head too long")
        return None
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise _Unusable(f"bad status line {lines[0][:80]!r}")
    status = int(parts[1])
    length: int | None = None
    connection = ""
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise _Unusable("bad header line")
        name = name.strip().lower()
        if name == "content-length":
            if length is not None or not value.strip().isdigit():
                raise _Unusable("bad or repeated Content-Length")
            length = int(value)
        elif name == "transfer-encoding":
            raise _Unusable("Transfer-Encoding")
        elif name == "connection":
            connection = value.strip().lower()
    if status < 200 or length is None:
        raise _Unusable(f"status {status} without a framed body")
    total = end + 4 + length
    if len(buf) < total:
        return None
    body = bytes(buf[end + 4 : total])
    del buf[:total]
    closes = "close" in connection or (parts[0] == "HTTP/1.0" and "keep-alive" not in connection)
    return status, body, closes


class Pipeline:
    """Pipelined GETs to one host; idle sockets are kept between batches (thread-safe)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        context: ssl.SSLContext | None,
        server_hostname: str,
        timeout: float,
        connections: int = 16,
        depth: int = 1,
        window: int = 128,
    ) -> None:
        self._addr = (host, port)
        self._context, self._server_hostname = context, server_hostname
        self.timeout = timeout
        self.connections, self.depth, self.window = connections, depth, window
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()

    def _connect(self) -> _Conn:
        with self._lock:
            if self._idle:
                return _Conn(self._idle.pop(), True)
        sock = socket.create_connection(self._addr, timeout=self.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._context is not None:
                sock = self._context.wrap_socket(sock, server_hostname=self._server_hostname)
        except BaseException:
            sock.close()
            raise
        return _Conn(sock, False)

    def _release(self, conn: _Conn, keep: bool) -> None:
        if keep and not conn.inflight and not conn.buf:
            with self._lock:
                if len(self._idle) < self.connections:
                    self._idle.append(conn.sock)
                    return
        conn.sock.close()

    def get_all(self, count: int, request: Callable[[int], bytes]) -> Generator[tuple[int, int, bytes], None, None]:
        """(i, status, body) for i in ``range(count)``, in that order; ``request(i)`` makes the
        bytes of request i when it is (re)sent. Status 0: no usable answer here (see module doc).

        At most ``window`` answers are held (sent but not yet yielded) at any time.
        """
        run = _Run(self, count, request)
        try:
            yield from run.results()
        finally:
            run.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close()

    def __del__(self) -> None:
        for sock in self._idle:
            sock.close()


class _Run:
    """One batch: the selector loop, the send queue and the answers not yet yielded."""

    def __init__(self, pipe: Pipeline, count: int, request: Callable[[int], bytes]) -> None:
        self._pipe, self._count, self._request = pipe, count, request
        self._depth = max(1, pipe.depth)
        self._queue: deque[int] = deque()  # sent again: before any index not sent yet
        self._next_new = 0
        self._done: dict[int, tuple[int, bytes]] = {}
        self._tries: dict[int, int] = {}
        self._conns: list[_Conn] = []
        self._hungry: list[_Conn] = []  # open sockets with room for more requests
        self._sel = selectors.DefaultSelector()

    def results(self) -> Iterator[tuple[int, int, bytes]]:
        nxt = 0
        while nxt < self._count:
            while nxt in self._done:
                status, body = self._done.pop(nxt)
                yield nxt, status, body
                nxt += 1
            if nxt < self._count:
                self._fill(nxt)
                self._wait()

    def close(self) -> None:
        for conn in self._conns:
            self._sel.unregister(conn.sock)
            self._pipe._release(conn, keep=True)
        self._conns.clear()
        self._sel.close()

    def _next_index(self, first_unyielded: int) -> int | None:
        if self._queue:
            return self._queue.popleft()
        if self._next_new < self._count and self._next_new < first_unyielded + self._pipe.window:
            self._next_new += 1
            return self._next_new - 1
        return None

    def _fill(self, first_unyielded: int) -> None:
        """Send what the window allows: fill open sockets to ``depth``, then open new ones."""
        hungry, self._hungry = self._hungry, []
        for conn in hungry:
            if conn in self._conns:  # not dropped meanwhile
                self._send(conn, first_unyielded)
        while len(self._conns) < self._pipe.connections and (self._queue or self._next_new < min(self._count, first_unyielded + self._pipe.window)):
            i = self._next_index(first_unyielded)
            if i is None:
                break
            try:
                conn = self._pipe._connect()
            except OSError:
                self._failed([i], count_first=True)
                return  # let the caller see a request that has run out of tries
            self._conns.append(conn)
            self._sel.register(conn.sock, selectors.EVENT_READ, conn)
            self._queue.appendleft(i)
            self._send(conn, first_unyielded)

    def _send(self, conn: _Conn, first_unyielded: int) -> None:
        batch: list[int] = []
        while len(conn.inflight) + len(batch) < self._depth:
            i = self._next_index(first_unyielded)
            if i is None:
                break
            batch.append(i)
        if len(conn.inflight) + len(batch) < self._depth:
            self._hungry.append(conn)  # the window is full: wait for it to move
        if not batch:
            return
        conn.inflight.extend(batch)
        try:
            conn.sock.sendall(b"".join(self._request(i) for i in batch))
        except OSError:
            self._drop(conn, broken=True)

    def _wait(self) -> None:
        if not self._conns:
            return
        events = self._sel.select(self._pipe.timeout)
        if not events:  # nothing from any socket for a whole timeout: start those over
            for conn in list(self._conns):
                self._drop(conn, broken=True)
            return
        for key, _ in events:
            self._read(key.data)

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(_RECV)
            while data and isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
                data += conn.sock.recv(_RECV)
        except OSError:
            self._drop(conn, broken=True)
            return
        if not data:
            self._drop(conn, broken=True)
            return
        conn.buf += data
        while conn.inflight:
            try:
                answer = parse_response(conn.buf)
            except _Unusable:
                self._done[conn.inflight.popleft()] = (UNSURE, b"")
                self._drop(conn, broken=False)
                return
            if answer is None:
                break
            status, body, closes = answer
            self._done[conn.inflight.popleft()] = (status, body)
            conn.answered += 1
            if closes:
                self._drop(conn, broken=False)
                return
        if conn.buf and not conn.inflight:  # bytes nobody asked for: the socket is out of step
            self._drop(conn, broken=False)
        elif len(conn.inflight) < self._depth and conn not in self._hungry:
            self._hungry.append(conn)

    def _drop(self, conn: _Conn, *, broken: bool) -> None:
        """Close ``conn`` and send its unanswered requests again elsewhere.

        ``broken``: it failed (error, EOF, timeout) rather than closed as announced. Then the
        oldest request counts a try, unless the socket was an idle one reused and never
        answered (the server may have closed it while it sat idle); and a socket that dies with
        several requests in flight means this server may not pipeline: one at a time from then.
        """
        self._sel.unregister(conn.sock)
        self._conns.remove(conn)
        conn.sock.close()
        pending = list(conn.inflight)
        conn.inflight.clear()
        if not pending:
            return
        stale = conn.reused and conn.answered == 0
        if broken and len(pending) > 1 and not stale:
            self._depth = 1
        self._failed(pending, count_first=broken and not stale)

    def _failed(self, pending: list[int], *, count_first: bool) -> None:
        first = pending[0]
        if count_first:
            tries = self._tries.get(first, 0) + 1
            self._tries[first] = tries
            if tries >= ATTEMPTS:
                self._done[first] = (UNSURE, b"")
                pending = pending[1:]
            else:
                time.sleep(_BACKOFF_S * 2 ** (tries - 1))
        self._queue.extendleft(reversed(pending))

