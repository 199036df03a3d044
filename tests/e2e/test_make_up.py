"""Issue #7 §3's acceptance: `make up` gives a working local deployment that the stock boto3 client
can use, and `make down` stops all of it.

A black box, in each mode (compose when ``docker compose`` or ``docker-compose`` works here; plain
processes always), each with its own state directory and ports: `make up` (twice: the second
says it is already up), the seed scenario through boto3's SageMaker client (Stopped by
ExplodingTensor), the tensors listed on SeaweedFS through boto3's S3 client, the job's row read
from PostgreSQL, a second job left running, then `make down`: no process, service container or
job container of the deployment is left, the data is; `make down PURGE=1` removes that too.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from test_control_plane import EXPLODING, job_request, watch

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
STAMP = ".venv/.installed"  # the Makefile's stamp of `make setup`, relative to ROOT


def _compose_works() -> bool:
    for cmd in (["docker", "compose", "version"], ["docker-compose", "version"]):
        try:
            if subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0:
                return True
        except (OSError, subprocess.TimeoutExpired):
            pass
    return False


def _postgres_installed() -> bool:
    return any(Path("/usr/lib/postgresql").glob("*/bin/initdb")) or shutil.which("initdb") is not None


def _needs(ok: bool, reason: str) -> None:
    """Skip locally when a prerequisite is missing; fail in CI, where it must be there."""
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports() -> dict[str, str]:
    """Free ports for the API, PostgreSQL and SeaweedFS (S3 port P takes P..P+4 and P+10000..P+10004)."""
    rng = random.Random()
    for _ in range(200):
        s3 = rng.randrange(20000, 30000, 10)
        api, db = s3 + 5, s3 + 6
        wanted = [*range(s3, s3 + 7), *range(s3 + 10000, s3 + 10005)]
        if all(_free(p) for p in wanted):
            return {"MURPHY_UP_PORT": str(api), "MURPHY_UP_S3_PORT": str(s3), "MURPHY_UP_DB_PORT": str(db)}
    raise RuntimeError("no free block of ports in 20000-40000 (S3 ports and their +10000)")


@dataclass
class Deployment:
    mode: str
    state: Path
    env: dict[str, str]
    settings: dict[str, str] = field(default_factory=dict)

    def make(self, *targets: str, timeout: float = 420) -> subprocess.CompletedProcess[str]:
        # -o: the venv is set up already (the test runs in it); `make up` must not reinstall it.
        cmd = ["make", "--no-print-directory", "-C", str(ROOT), "-o", STAMP, *targets]
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)

    def load(self) -> None:
        for line in (self.state / "up.env").read_text().splitlines():
            if "=" in line and not line.startswith("#"):
                key, value = line.split("=", 1)
                self.settings[key] = value

    def url(self, key: str) -> str:
        return f"http://127.0.0.1:{self.settings[key]}"

    def client(self, service: str) -> Any:
        import boto3
        from botocore.config import Config

        endpoint = self.url("MURPHY_UP_S3_PORT" if service == "s3" else "MURPHY_UP_PORT")
        return boto3.client(service, endpoint_url=endpoint, region_name=self.settings["MURPHY_UP_REGION"],
                            aws_access_key_id=self.settings["MURPHY_UP_S3_ACCESS_KEY"],
                            aws_secret_access_key=self.settings["MURPHY_UP_S3_SECRET_KEY"],
                            config=Config(s3={"addressing_style": "path"}))

    def database_url(self) -> str:
        s = self.settings
        return f"postgresql+psycopg://murphy:{s['MURPHY_UP_DB_PASSWORD']}@127.0.0.1:{s['MURPHY_UP_DB_PORT']}/murphy"

    def runtime_id(self) -> str:
        from murphy.runtimes.docker_spec import runtime_id

        return runtime_id(str(self.state / "data" / "containers"))


@pytest.fixture(params=["processes", "compose"])
def deployment(request: pytest.FixtureRequest, docker_engine: Any) -> Iterator[Deployment]:
    mode = str(request.param)
    if mode == "compose":
        # Optional everywhere, CI included: without compose, `make up` uses processes mode.
        if not _compose_works():
            pytest.skip("neither `docker compose` nor `docker-compose` works here")
    else:
        _needs(_postgres_installed(), "no PostgreSQL server binaries (apt-get install postgresql)")
    # Not under pytest's 0700 base directory: as root, processes mode runs PostgreSQL as the
    # user postgres, which must reach its cluster in the state directory.
    state = Path(tempfile.mkdtemp(prefix=f"murphy-up-{mode}-"))
    state.chmod(0o755)
    env = {**os.environ, **_ports(), "MURPHY_UP_MODE": mode, "MURPHY_UP_DIR": str(state)}
    for key in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "MURPHY_S3_ENDPOINT_URL", "MURPHY_ENDPOINT"):
        env.pop(key, None)
    dep = Deployment(mode, state, env)
    try:
        yield dep
    finally:
        if state.exists():
            dep.make("down", "PURGE=1", timeout=180)
        shutil.rmtree(state, ignore_errors=True)


def _gone(pid: int) -> bool:
    """Not running: no such process, or a zombie its parent has not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _listening(port: str) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", int(port))) == 0


def test_make_up_serves_the_seed_scenario_and_make_down_stops_everything(deployment: Deployment,
                                                                          docker_engine: Any) -> None:
    dep = deployment
    started = time.monotonic()
    up = dep.make("up")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "murphy is up in" in up.stdout and f"({dep.mode} mode;" in up.stdout, up.stdout + up.stderr
    dep.load()
    assert dep.settings["MURPHY_UP_MODE"] == dep.mode
    assert dep.url("MURPHY_UP_PORT") in up.stdout and str(dep.state / "credentials.env") in up.stdout
    assert "boto3.client('sagemaker')" in up.stdout
    assert (dep.state / "credentials.env").stat().st_mode & 0o077 == 0
    up_seconds = time.monotonic() - started

    again = dep.make("up", timeout=120)
    assert again.returncode == 0 and "already up" in again.stdout, again.stdout + again.stderr

    # The seed scenario through the stock boto3 client; the bucket is the one `make up` made.
    sagemaker, bucket = dep.client("sagemaker"), dep.settings["MURPHY_UP_BUCKET"]
    sagemaker.create_training_job(**job_request("seed-exploding", bucket, EXPLODING))
    job, seen = watch(sagemaker, "seed-exploding", timeout=150)
    assert seen[-1] == "IssuesFound", seen
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped"), job

    # It ran in Docker containers (the runtime's handles say so), its tensors are on SeaweedFS,
    # its record is in PostgreSQL.
    containers = dep.state / "data" / "containers"
    handles = [json.loads(p.read_text()) for p in containers.glob("seed-exploding-*/handle.json")]
    assert {h["data"]["role"] for h in handles} == {"training", "rule"}, handles
    assert all(h["runtime"] == "docker" for h in handles)
    listed = dep.client("s3").list_objects_v2(Bucket=bucket, Prefix="debug/seed-exploding/debug-output/")
    keys = [o["Key"] for o in listed.get("Contents", [])]
    assert any(k.endswith(".tfevents") for k in keys), keys
    assert any(k.endswith("worker_0_collections.json") for k in keys), keys

    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    engine = sa.create_engine(dep.database_url(), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            row = conn.execute(sa.text("SELECT status, secondary_status FROM training_jobs WHERE name = :n"),
                               {"n": "seed-exploding"}).one()
    finally:
        engine.dispose()
    assert tuple(row) == ("Stopped", "Stopped")

    # A job still running at `make down`: its containers must go too.
    long_run = job_request("still-running", bucket, {"lr": "0.001", "scale": "1", "steps": "100000000",
                                                     "debug_frequency": "1000000"})
    long_run.pop("DebugRuleConfigurations")
    sagemaker.create_training_job(**long_run)
    deadline = time.monotonic() + 60
    while sagemaker.describe_training_job(TrainingJobName="still-running")["SecondaryStatus"] != "Training":
        assert time.monotonic() < deadline, "the second job never started training"
        time.sleep(0.2)
    label = f"io.murphy.runtime={dep.runtime_id()}"
    assert docker_engine.containers.list(filters={"label": label}), "no job container while a job runs"

    # What `make down` must stop: three processes, or the compose project's three containers.
    pids: list[int] = []
    project = dep.settings["MURPHY_UP_PROJECT"]
    compose_label = f"com.docker.compose.project={project}"
    if dep.mode == "processes":
        pid_files = ("murphy.pid", "s3.pid", "postgres/postmaster.pid")
        pids = [int((dep.state / f).read_text().split()[0]) for f in pid_files]
        assert not any(_gone(p) for p in pids)
    else:
        assert len(docker_engine.containers.list(filters={"label": compose_label})) == 3
    down = dep.make("down", timeout=180)
    assert down.returncode == 0, down.stdout + down.stderr

    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in pids if not _gone(p)] == []
    assert docker_engine.containers.list(all=True, filters={"label": compose_label}) == []
    assert docker_engine.containers.list(all=True, filters={"label": label}) == []
    for key in ("MURPHY_UP_PORT", "MURPHY_UP_S3_PORT", "MURPHY_UP_DB_PORT"):
        assert not _listening(dep.settings[key]), f"{key} {dep.settings[key]} still answers"
    # The data stays for the next `make up`.
    assert (dep.state / "credentials.env").exists() and (dep.state / "data" / "containers").is_dir()
    if dep.mode == "compose":
        assert docker_engine.volumes.list(filters={"name": f"{project}_db-data"})

    purge = dep.make("down", "PURGE=1", timeout=180)
    assert purge.returncode == 0, purge.stdout + purge.stderr
    assert not dep.state.exists()
    assert docker_engine.volumes.list(filters={"name": project}) == []
    print(f"{dep.mode}: make up {up_seconds:.1f} s, whole test {time.monotonic() - started:.1f} s")
