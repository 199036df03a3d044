"""Reaching one S3 endpoint from a container that has no network.

Docker containers run with ``--network none``; when the job's store is a real S3 endpoint the
container still needs that endpoint, and only that one. The host side (the Docker runtime)
listens on a Unix socket in a directory bind-mounted into the container and forwards each
connection to the endpoint's host and port; the container side (the training toolkit, the rule
evaluator) listens on the container's own loopback interface and forwards each connection to
that socket. Processes in the container then use ``http://127.0.0.1:<port>`` as their endpoint:
nothing else is reachable, because the container has no interface but ``lo``.

Both sides are the same byte pump (:class:`Forwarder`): HTTP passes through untouched, so
request signatures (which cover the ``Host`` header the client sends) stay valid as long as the
server does not insist on its own host name, which S3 servers addressed by IP do not.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)

#: Set in a container: the Unix socket the host side listens on.
SOCKET_ENV = "MURPHY_S3_GATEWAY_SOCKET"
#: Set in a container: the loopback port the container side listens on.
PORT_ENV = "MURPHY_S3_GATEWAY_PORT"
DEFAULT_PORT = 47113
_CHUNK = 256 * 1024


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        # Half-close so the other direction can still drain (HTTP keep-alive ends this way).
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


class Forwarder:
    """Accepts on ``listener`` and joins each connection to a fresh one from ``connect``."""

    def __init__(self, listener: socket.socket, connect: Callable[[], socket.socket], name: str) -> None:
        self.listener = listener
        self._connect = connect
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name=name, daemon=True)

    def start(self) -> Forwarder:
        self._thread.start()
        return self

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            threading.Thread(target=self._join, args=(client,), daemon=True).start()

    def _join(self, client: socket.socket) -> None:
        try:
            upstream = self._connect()
        except OSError as e:
            log.warning("S3 gateway: cannot reach the endpoint: %s", e)
            client.close()
            return
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()
        client.close()
        upstream.close()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()


def serve_unix(socket_path: str, host: str, port: int) -> Forwarder:
    """Host side: listen on ``socket_path`` (replacing a stale socket), forward to host:port."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    # Containers run as another user; the directory, not the socket's mode, is the boundary.
    os.chmod(socket_path, 0o666)
    listener.listen(128)

    def connect() -> socket.socket:
        return socket.create_connection((host, port), timeout=30)

    return Forwarder(listener, connect, f"s3-gateway:{socket_path}").start()


def serve_loopback(port: int, socket_path: str) -> Forwarder:
    """Container side: listen on 127.0.0.1:``port``, forward to the host's socket."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)

    def connect() -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(socket_path)
        except OSError:
            s.close()
            raise
        return s

    return Forwarder(listener, connect, f"s3-gateway:{port}").start()


_started: Forwarder | None = None
_lock = threading.Lock()


def start_from_env(environ: Mapping[str, str] | None = None) -> Forwarder | None:
    """In a container: start the loopback side once per process if the runtime asked for it.

    Returns None when the variables are not set, or when the port is already served (another
    process of the same container started it: the toolkit serves its child processes too)."""
    global _started
    env = os.environ if environ is None else environ
    path = env.get(SOCKET_ENV)
    if not path:
        return None
    with _lock:
        if _started is not None:
            return _started
        port = int(env.get(PORT_ENV) or DEFAULT_PORT)
        try:
            _started = serve_loopback(port, path)
        except OSError as e:
            if e.errno == 98:  # EADDRINUSE: a parent process of this container serves it
                return None
            raise
        return _started
