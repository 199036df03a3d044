"""A real ``murphy server`` process for black-box tests (stock boto3 / sagemaker clients talk to
it). Shared by tests/e2e and tests/compat: the ``make_server`` fixture lives in tests/conftest.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from murphy.core.ports import free_port


def listens(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds the socket listening on 127.0.0.1:``port``; None where /proc
    cannot tell. Parallel test runs race for free ports: the server answering /healthz on a port
    may be another run's, while this one is about to fail to bind it."""
    try:
        mine = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    mine.add(target[len("socket:["):-1])
        with open("/proc/net/tcp", encoding="ascii") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    return fields[9] in mine
        return False
    except OSError:
        return None


class PortTaken(RuntimeError):
    """The server could not bind its port (another process took it after free_port())."""


@dataclass
class MurphyServer:
    data_dir: Path
    port: int
    args: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "murphy.cli", "server", "--port", str(self.port), "--data-dir", str(self.data_dir), *self.args],
            stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text()[-3000:]
                kind = PortTaken if "address already in use" in tail.lower() else RuntimeError
                raise kind(f"murphy server exited with {self.proc.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/healthz", timeout=1) as r:
                    if r.status == 200 and listens(self.proc.pid, self.port) is not False:
                        return
                time.sleep(0.1)  # another process's server answers on this port: ours will exit
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"murphy server did not become healthy:\n{self.log_path.read_text()[-3000:]}")

    def kill(self) -> None:
        """kill -9 the server only (its jobs' processes live in their own sessions)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def client(self, service: str = "sagemaker", region: str = "us-west-2") -> Any:
        import boto3

        return boto3.client(service, endpoint_url=self.endpoint, region_name=region,
                            aws_access_key_id="test", aws_secret_access_key="test")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def kill_job_processes(data_dir: Path) -> None:
    """Leave nothing running: SIGKILL every process in the sessions of the containers the server
    started (each container is a session leader; its program may have its own process group)."""
    leaders = set()
    for handle_file in (data_dir / "containers").glob("*/handle.json"):
        with contextlib.suppress(ValueError, KeyError, OSError):
            leaders.add(int(json.loads(handle_file.read_text())["data"]["pid"]))
    # A launch killed before its handle.json leaves processes only their labels name.
    marker = f"MURPHY_CONTAINER={data_dir / 'containers'}/".encode()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            labelled = any(e.startswith(marker) for e in (stat.parent / "environ").read_bytes().split(b"\0"))
            if int(fields[3]) in leaders or labelled:  # field 6 of /proc/PID/stat: the session id
                os.kill(int(stat.parent.name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


def kill_job_containers(data_dir: Path) -> int:
    """Remove every Docker container the server's Docker runtime started (by its labels);
    returns how many. Nothing to do without the Docker SDK, an engine, or such containers."""
    root = data_dir / "containers"
    if not root.exists():
        return 0
    try:
        import docker

        from murphy.runtimes.docker_spec import LABEL_PREFIX, runtime_id

        client = docker.from_env(version="auto")
        found = client.containers.list(all=True, filters={"label": f"{LABEL_PREFIX}runtime={runtime_id(str(root))}"})
        for c in found:
            c.remove(force=True)
        client.close()
        return len(found)
    except Exception:
        return 0


MakeServer = Callable[..., MurphyServer]


def server_factory(tmp_path: Path) -> Iterator[MakeServer]:
    """The body of the ``make_server`` fixture: start servers on demand, stop them (and every
    process their jobs left) at teardown."""
    started: list[MurphyServer] = []

    def make(*args: str, env: dict[str, str] | None = None, data_dir: Path | None = None) -> MurphyServer:
        server = MurphyServer(
            data_dir=data_dir or tmp_path / "murphy",
            port=free_port(),
            args=list(args),
            env={**os.environ, **(env or {})},
            log_path=tmp_path / f"server-{len(started)}.log",
        )
        started.append(server)
        for _ in range(3):
            try:
                server.start()
                return server
            except PortTaken:
                server.port = free_port()  # taken by a parallel run between free_port() and the bind
        server.start()
        return server

    try:
        yield make
    finally:
        for server in started:
            server.stop()
            kill_job_processes(server.data_dir)
            kill_job_containers(server.data_dir)
