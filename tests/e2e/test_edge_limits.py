"""Issue 18 §4 at the edge of a real ``murphy server``: an oversized body gets the 413 error body
and a clean close (never a reset mid-upload), a slow client times out (headers and body),
oversized headers and too-deep JSON get AWS-shaped errors; with auth on and off."""

from __future__ import annotations

import json
import socket
import time

import pytest

from murphy_server import MakeServer, MurphyServer

SIX_MIB = 6 * 1024 * 1024


@pytest.fixture(params=["none", "sigv4"])
def server(request: pytest.FixtureRequest, make_server: MakeServer) -> MurphyServer:
    return make_server("--auth", request.param, "--runtime", "fake",
                       env={"MURPHY_HEADER_TIMEOUT_S": "1", "MURPHY_BODY_READ_TIMEOUT_S": "1"})


def exchange(server: MurphyServer, head: bytes, body: bytes = b"", *, pause_s: float = 0.0) -> bytes:
    """Send ``head`` + ``body`` (all of it: a reset would raise here), then read until the server closes."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(head)
        if pause_s:
            time.sleep(pause_s)
        s.sendall(body)
        chunks = []
        while chunk := s.recv(65536):  # ConnectionResetError would fail the test
            chunks.append(chunk)
    return b"".join(chunks)


def status_and_json(raw: bytes) -> tuple[int, dict[str, str], dict[str, object]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, json.loads(body)


def wire_head(length: int, extra: str = "") -> bytes:
    return (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-amz-json-1.1\r\n"
            f"X-Amz-Target: SageMaker.ListTrainingJobs\r\nContent-Length: {length}\r\n{extra}\r\n").encode()


def test_a_six_mib_body_gets_413_and_a_clean_close(server: MurphyServer) -> None:
    body = b"{" + b" " * (SIX_MIB - 2) + b"}"
    status, headers, error = status_and_json(exchange(server, wire_head(len(body)), body))
    assert status == 413 and headers["connection"] == "close"
    assert error["__type"] == "RequestEntityTooLargeException" and "1048576-byte limit" in str(error["message"])


def test_slow_loris_headers_and_body_time_out(server: MurphyServer) -> None:
    started = time.monotonic()
    raw = exchange(server, b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Tar", b"get: x\r\n", pause_s=2.0)
    assert raw.startswith(b"HTTP/1.1 408 ") and time.monotonic() - started < 10
    status, _, error = status_and_json(exchange(server, wire_head(100), b"{" * 10, pause_s=0.1))
    assert status == 408 and error["__type"] == "RequestTimeout"


def test_oversized_headers_and_deep_json(server: MurphyServer) -> None:
    status, _, error = status_and_json(exchange(server, wire_head(2, "X-Big: " + "a" * 20000 + "\r\n"), b"{}"))
    assert status == 431 and error["__type"] == "RequestHeaderFieldsTooLarge"
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    status, _, error = status_and_json(exchange(server, wire_head(len(deep), "Connection: close\r\n"), deep))
    if status == 400 and error["__type"] == "MissingAuthenticationTokenException":
        return  # auth answers first, before the body is parsed
    assert status == 400 and error["__type"] == "SerializationException" and "nested too deeply" in str(error["message"])
