"""Session-wide fixtures: the real S3 servers (moto's server and SeaweedFS), and ``make_server``,
which starts real ``murphy server`` processes (tests/murphy_server.py).

Servers start lazily, the first time a test asks for them, and stop at the end of the session.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import murphy_server
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
def make_server(tmp_path: Path) -> Iterator[murphy_server.MakeServer]:
    """``make(*server_args, env=..., data_dir=...)`` starts a ``murphy server`` on a free port of
    127.0.0.1 and waits until it is healthy; every one is stopped at teardown, with its jobs."""
    yield from murphy_server.server_factory(tmp_path)


@pytest.fixture
def s3_bucket(s3_server: servers.S3Server) -> str:
    return servers.new_bucket(s3_server)


# --- PostgreSQL (the job store's contract tests) ------------------------------------------------
# `source infra/ci/postgres.sh start` starts Debian's cluster and exports the URL; CI does that.

_DEFAULT_POSTGRES_URL = "postgresql+psycopg://murphy:murphy@127.0.0.1:5432/postgres"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a fresh PostgreSQL database, created for this session and dropped at its end.

    The server is ``$MURPHY_TEST_POSTGRES_URL`` or, unset, the role infra/ci/postgres.sh creates
    on 127.0.0.1:5432. No server: skip locally, fail when ``$CI`` is set or the URL was given.
    """
    import os
    import uuid

    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    configured = os.environ.get("MURPHY_TEST_POSTGRES_URL")
    base = sa.make_url(configured or _DEFAULT_POSTGRES_URL)
    admin = sa.create_engine(
        base, isolation_level="AUTOCOMMIT", poolclass=NullPool, connect_args={"connect_timeout": 5}
    )
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except sa.exc.OperationalError as e:
        admin.dispose()
        reason = (
            f"PostgreSQL unreachable at {base.render_as_string(hide_password=True)} ({e.orig}); "
            "run `source infra/ci/postgres.sh start` or set MURPHY_TEST_POSTGRES_URL"
        )
        if configured or os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    name = f"murphy_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        # A locale-aware collation, as production databases usually have: the store must sort
        # names by bytes regardless. Older servers or ones without ICU get the default.
        try:
            conn.exec_driver_sql(
                f'CREATE DATABASE "{name}" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE \'en-US\''
            )
        except sa.exc.DBAPIError:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


# --- Docker -----------------------------------------------------------------------------------
# CI installs docker.io, starts dockerd and builds murphy's images (`make images-cpu`) before the
# tests. Without an engine or the images: skip locally, fail when ``$CI`` is set.

DOCKER_TEST_IMAGES = ("murphy/pytorch-cpu:latest", "murphy/linear-regression-demo:latest",
                      "murphy/rule-evaluator:latest")


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[object]:
    """A Docker client for the engine murphy's images are built on."""
    import os

    try:
        import docker
        import docker.errors

        client = docker.from_env(version="auto")
        client.ping()
        missing = [i for i in DOCKER_TEST_IMAGES if not client.images.list(name=i)]
    except Exception as e:  # no SDK, no socket, engine down: all mean "no Docker here"
        reason = f"no Docker engine ({type(e).__name__}: {e}); start dockerd (see .ci/run)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    if missing:
        reason = f"murphy's images are not built ({', '.join(missing)}); run `make images-cpu`"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    yield client
    client.close()
