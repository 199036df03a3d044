"""Session-wide fixtures: the real S3 servers (moto's server and SeaweedFS).

Servers start lazily, the first time a test asks for them, and stop at the end of the session.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import servers


def _serve(name: str) -> Iterator[servers.S3Server]:
    srv = servers.start(name)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[servers.S3Server]:
    yield from _serve("moto")


@pytest.fixture(scope="session")
def seaweedfs_server() -> Iterator[servers.S3Server]:
    yield from _serve("seaweedfs")


@pytest.fixture(scope="session", params=["moto", "seaweedfs"])
def s3_server(request: pytest.FixtureRequest) -> servers.S3Server:
    """Each real S3 server in turn."""
    fixture = "moto_server" if request.param == "moto" else "seaweedfs_server"
    srv: servers.S3Server = request.getfixturevalue(fixture)
    return srv


@pytest.fixture
def s3_bucket(s3_server: servers.S3Server) -> str:
    return servers.new_bucket(s3_server)
