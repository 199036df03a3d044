"""A free TCP port on the loopback interface, for the servers murphy starts on this machine (the
embedded service, a job's torchrun rendezvous, a cluster's master port). Standard library only,
so that every layer above can use it."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the OS picks it; another process may take it before the
    caller binds it, which the callers tolerate as any bind failure)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
