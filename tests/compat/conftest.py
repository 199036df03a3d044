"""Fixtures for the smdebug compatibility suite: the isolated smdebug 1.0.34 venv (created on first
use by infra/ci/smdebug_venv.sh) and the recorded training runs, one per (writer, store), each made
once per session by 2 torch.distributed (gloo) worker processes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compat_harness as h

import servers


@pytest.fixture(scope="session")
def smdebug_python() -> str:
    """The smdebug venv's python (the venv is created, idempotently, on first use)."""
    return h.ensure_smdebug_venv()


def _python(writer: str, smdebug_python: str) -> str:
    return smdebug_python if writer == "smdebug" else h.murphy_python()


def _local_run(writer: str, factory: pytest.TempPathFactory, smdebug_python: str) -> h.Run:
    base = factory.mktemp(f"{writer}-local")
    out = base / "trial"
    env = h.clean_env()
    h.train(writer, _python(writer, smdebug_python), str(out), base / "truth", env)
    return h.Run(writer, str(out), out, base / "truth", env)


def _s3_run(writer: str, server: servers.S3Server, factory: pytest.TempPathFactory, smdebug_python: str) -> h.Run:
    base = factory.mktemp(f"{writer}-{server.name}")
    bucket = servers.new_bucket(server, prefix="compat")
    env = h.clean_env(server.env())
    uri = f"s3://{bucket}/run"
    h.train(writer, _python(writer, smdebug_python), uri, base / "truth", env)
    local = h.download(server.client(), bucket, "run", base / "copy")
    return h.Run(writer, uri, local, base / "truth", env)


@pytest.fixture(scope="session")
def smdebug_local_run(tmp_path_factory: pytest.TempPathFactory, smdebug_python: str) -> h.Run:
    return _local_run("smdebug", tmp_path_factory, smdebug_python)


@pytest.fixture(scope="session")
def murphy_local_run(tmp_path_factory: pytest.TempPathFactory, smdebug_python: str) -> h.Run:
    return _local_run("murphy", tmp_path_factory, smdebug_python)


@pytest.fixture(scope="session")
def smdebug_seaweedfs_run(
    seaweedfs_server: servers.S3Server, tmp_path_factory: pytest.TempPathFactory, smdebug_python: str
) -> h.Run:
    return _s3_run("smdebug", seaweedfs_server, tmp_path_factory, smdebug_python)


@pytest.fixture(scope="session")
def murphy_seaweedfs_run(
    seaweedfs_server: servers.S3Server, tmp_path_factory: pytest.TempPathFactory, smdebug_python: str
) -> h.Run:
    return _s3_run("murphy", seaweedfs_server, tmp_path_factory, smdebug_python)


@pytest.fixture(scope="session")
def murphy_moto_run(
    moto_server: servers.S3Server, tmp_path_factory: pytest.TempPathFactory, smdebug_python: str
) -> h.Run:
    return _s3_run("murphy", moto_server, tmp_path_factory, smdebug_python)


@pytest.fixture
def run_named(request: pytest.FixtureRequest) -> Callable[[str], h.Run]:
    """Look a run fixture up by name (for parametrised tests)."""

    def get(name: str) -> h.Run:
        run: h.Run = request.getfixturevalue(name)
        return run

    return get
