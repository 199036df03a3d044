"""``murphy.core.ports.free_port``: the one free-port helper of the service, the toolkit and the SDK."""

from __future__ import annotations

import socket

from murphy.container import distributed
from murphy.core.ports import free_port
from murphy.runtimes import cluster
from murphy.sdk import embedded


def test_the_port_is_free_on_the_loopback() -> None:
    port = free_port()
    assert 0 < port < 65536
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))  # nothing holds it


def test_every_caller_uses_the_one_helper() -> None:
    assert distributed.free_port is cluster.free_port is embedded.free_port is free_port
