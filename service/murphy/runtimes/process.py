"""The embedded default runtime: each container is a local process tree with its own ``/opt/ml``.

``<root_dir>/<container_name>/`` holds everything about one container::

    handle.json   the Handle (written once the process exists; its presence makes launch idempotent)
    launch.json   present while a launch is under way, with the S3 key it issued (a crash leaves
                  it: the next launch looks for the container's processes before starting any)
    log.jsonl     stdout+stderr, one {"t": epoch_ms, "m": line} per line (written by the shim)
    exit.json     {"exit_code", "signal", "ended_at"} once the container ended
    stage.json    {"stage": "Downloading"|"Training"|"Uploading"} (training toolkit)
    shim.err      the shim's own stderr (empty unless the shim itself crashed)
    opt/ml/...    SageMaker's /opt/ml (training containers)

The container is one session started by ``python -m murphy.runtimes.shim`` (its own process
group, so it outlives the service). Everything needed to find it again is in the Handle: a new
runtime instance re-attaches from it. Instance types are not enforced (no CPU/memory limits).

Labels: every process of a container is started with ``MURPHY_RUNTIME_ID`` (this
installation), ``MURPHY_JOB_NAME``, ``MURPHY_CONTAINER_ROLE`` and ``MURPHY_CONTAINER`` (its
directory) in its environment, which ``/proc/<pid>/environ`` shows for as long as the process
lives, whatever happened to the service: :meth:`ProcessRuntime.list_containers` asks the OS.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes import files, logfile, procfs, s3_access
from murphy.runtimes.base import (
    ContainerState,
    FoundContainer,
    Handle,
    JobCredentials,
    LogPage,
    Plan,
    TrainingPlan,
    runtime_id,
    scoped_environment,
)
from murphy.runtimes.catalog import ImageCatalog
from murphy.runtimes.cluster import HostNetwork, loopback_addresses, shared_master_port
from murphy.runtimes.layout import (
    CONTAINER_MARKER_ENV,
    program_argv,
    rule_env,
    write_training_layout,
)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
#: The labels (see the module docstring); ``MURPHY_CONTAINER`` is layout's CONTAINER_MARKER_ENV.
RUNTIME_ID_ENV = "MURPHY_RUNTIME_ID"
JOB_ENV = "MURPHY_JOB_NAME"
ROLE_ENV = "MURPHY_CONTAINER_ROLE"


def _write_json(path: str, doc: Any) -> None:
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def _create_json(path: str, doc: Any) -> bool:
    """Write ``doc`` at ``path`` unless a file is already there (atomically); True if written."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def _launch_key(d: str) -> str | None:
    """The S3 key id a launch that died before its handle.json had issued (in its launch.json)."""
    doc = files.read_json(os.path.join(d, "launch.json"))
    key_id = doc.get("s3_access_key_id") if isinstance(doc, dict) else None
    return key_id if isinstance(key_id, str) else None


class ProcessRuntime:
    """:class:`~murphy.runtimes.base.Runtime` over local processes (see the module docstring)."""

    def __init__(self, root_dir: Path, catalog: ImageCatalog, base_env: Mapping[str, str],
                 python: str = sys.executable, name: str = "process", credentials: JobCredentials | None = None) -> None:
        self.root_dir = Path(root_dir)
        self.catalog = catalog
        self.base_env = dict(base_env)
        self.python = python
        self.name = name
        self.rid = runtime_id(str(self.root_dir))
        # Shims this instance started, so they are reaped (a restarted service is not their
        # parent; init reaps them then).
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        #: Per-container S3 credentials, through murphy's S3 gateway on loopback (started with
        #: the first launch) when the store is S3 (a configured endpoint or AWS's own, which the
        #: gateway forwards to); local buckets have none. docs/security.md.
        self.credentials = None if base_env.get("MURPHY_S3_LOCAL_ROOT") else credentials
        self._gateway_url = s3_access.listen_loopback(self.credentials, self.root_dir) if self.credentials else None

    # ---- launch ----------------------------------------------------------------------------

    def launch(self, plan: Plan) -> Handle:
        if not _NAME.fullmatch(plan.container_name):
            raise RuntimeBackendError(f"invalid container name {plan.container_name!r}")
        hps = plan.hyperparameters if isinstance(plan, TrainingPlan) else None
        entry = self.catalog.resolve(plan.image, hps)
        argv = program_argv(plan, entry, self.python)
        cdir = self.root_dir / plan.container_name
        cdir.mkdir(parents=True, exist_ok=True)
        with files.exclusive(cdir):
            existing = self._recorded(str(cdir))
            if existing is not None:
                return existing
            if (cdir / "launch.json").exists():  # a launch died before its handle.json
                found = [c for c in self.list_containers(plan.job_name) if c.handle.data["dir"] == str(cdir)]
                if found:
                    h = found[0].handle
                    _write_json(os.path.join(h.data["dir"], "handle.json"), {"runtime": h.runtime, "id": h.id, "data": h.data})
                    return h
                self._revoke(_launch_key(str(cdir)))  # that launch's container is gone, and so goes its key
            try:
                return self._start(cdir, plan, entry, argv)
            except OSError as e:
                raise RuntimeBackendError(f"cannot start container {plan.container_name}: {e}") from e

    @staticmethod
    def _recorded(d: str) -> Handle | None:
        existing = files.read_json(os.path.join(d, "handle.json"))
        if existing is None:
            return None
        return Handle(runtime=existing["runtime"], id=existing["id"], data=existing["data"])

    @staticmethod
    def _data(d: str, container_name: str, role: str) -> dict[str, Any]:
        data: dict[str, Any] = {
            "container_name": container_name, "role": role, "dir": d,
            "log": os.path.join(d, "log.jsonl"), "exit": os.path.join(d, "exit.json"),
            "stage": os.path.join(d, "stage.json"),
        }
        if role == "training":
            data["opt_ml"] = os.path.join(d, "opt", "ml")
            data["failure"] = os.path.join(d, "opt", "ml", "output", "failure")
        return data

    def _start(self, cdir: Path, plan: Plan, entry: Any, argv: list[str]) -> Handle:
        d = str(cdir)
        data = self._data(d, plan.container_name, plan.role)
        for stale in ("exit.json", "stage.json"):  # from a launch that died before its handle
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(d, stale))
        if isinstance(plan, TrainingPlan):
            opt_ml, env = write_training_layout(d, plan, entry, entry.python or self.python, self.base_env,
                                                network=self._network(plan))
            data["opt_ml"] = opt_ml.root
            data["failure"] = opt_ml.failure_file
        else:
            env = rule_env(plan, self.base_env)
        key_id = None
        if self.credentials is not None:
            creds = self.credentials.issue(plan, self._gateway_url)
            env = scoped_environment(env, creds)
            key_id = data["s3_access_key_id"] = creds.access_key_id
        env.update({CONTAINER_MARKER_ENV: d, RUNTIME_ID_ENV: self.rid, JOB_ENV: plan.job_name, ROLE_ENV: plan.role})
        shim = [self.python, "-m", "murphy.runtimes.shim", "--log", data["log"], "--exit", data["exit"], "--", *argv]
        try:
            # The key goes into launch.json too: a container found again after a launch that died
            # before its handle.json (:meth:`_rebuilt`) still has its key revoked on removal.
            _write_json(os.path.join(d, "launch.json"), {"at": time.time(), "s3_access_key_id": key_id})
            with open(os.path.join(d, "shim.err"), "ab") as err:
                proc = subprocess.Popen(shim, cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                        start_new_session=True)
        except BaseException:
            self._revoke(key_id)  # no container holds it, so no removal would ever revoke it
            raise
        started = procfs.start_time(proc.pid)
        if started is None:  # already gone and reaped: cannot be, it is our child until waited
            self._revoke(key_id)
            raise RuntimeBackendError(f"container {plan.container_name} vanished at start")
        with self._lock:
            self._children[proc.pid] = proc
        data.update(pid=proc.pid, pgid=proc.pid, start_time=started, started_at=time.time())
        handle = Handle(runtime=self.name, id=f"{proc.pid}:{started}", data=data)
        _write_json(os.path.join(d, "handle.json"), {"runtime": handle.runtime, "id": handle.id, "data": data})
        os.unlink(os.path.join(d, "launch.json"))
        return handle

    def _network(self, plan: TrainingPlan) -> HostNetwork | None:
        """Several hosts share this machine's network: loopback addresses, a port per job."""
        if len(plan.hosts) < 2:
            return None
        first = str(self.root_dir / (plan.first_host_container or plan.container_name))
        return HostNetwork(loopback_addresses(plan.hosts), shared_master_port(first))

    # ---- list ------------------------------------------------------------------------------

    def list_containers(self, job_name: str | None = None) -> list[FoundContainer]:
        """Live containers of this runtime id, from ``/proc`` (an exited one has no process)."""
        groups: dict[str, list[tuple[procfs.ProcStat, dict[str, str]]]] = {}
        for st, env in procfs.marked(f"{RUNTIME_ID_ENV}={self.rid}"):
            d = env.get(CONTAINER_MARKER_ENV)
            if st.pid == os.getpid():  # a service started from inside a container inherits its labels
                continue
            if d and (job_name is None or env.get(JOB_ENV) == job_name):
                groups.setdefault(d, []).append((st, env))
        out = []
        for d, members in sorted(groups.items()):
            env = members[0][1]
            role: Literal["training", "rule"] = "rule" if env.get(ROLE_ENV) == "rule" else "training"
            handle = self._recorded(d) or self._rebuilt(d, role, [m for m, _ in members])
            out.append(FoundContainer(handle, env.get(JOB_ENV, ""), os.path.basename(d), role, "running"))
        return out

    def _rebuilt(self, d: str, role: str, members: list[procfs.ProcStat]) -> Handle:
        """The handle of a container whose launch died before writing it: the shim leads the
        session (pid = sid); without it, its leftovers' session and earliest start stand in."""
        leader = next((m for m in members if m.pid == m.sid), None)
        pid = leader.pid if leader else members[0].sid
        started = leader.start_time if leader else min(m.start_time for m in members)
        data = self._data(d, os.path.basename(d), role)
        data.update(pid=pid, pgid=pid, start_time=started, started_at=None)
        key_id = _launch_key(d)
        if key_id:
            data["s3_access_key_id"] = key_id
        return Handle(runtime=self.name, id=f"{pid}:{started}", data=data)

    def _revoke(self, key_id: str | None) -> None:
        if key_id and self.credentials is not None:
            self.credentials.revoke(key_id)

    # ---- status ----------------------------------------------------------------------------

    def _reap(self) -> None:
        with self._lock:
            for pid, proc in list(self._children.items()):
                if proc.poll() is not None:
                    del self._children[pid]

    def status(self, handle: Handle) -> ContainerState:
        d = handle.data
        ended = files.read_json(d["exit"])
        if ended is None:
            self._reap()
            if procfs.alive(d["pid"], d["start_time"]):
                return ContainerState("running", started_at=d.get("started_at"), stage=files.stage(d))
            ended = files.read_json(d["exit"])  # it may have ended between the two looks
        if ended is None:
            return ContainerState(
                "missing", failure="the container process vanished (killed without a trace, or the host restarted)",
                log_tail=self._tail(d), started_at=d.get("started_at"), stage=files.stage(d),
            )
        sig = ended.get("signal")
        code = ended.get("exit_code")
        if code is None:
            code = 128 + sig if sig else None
        failure = files.failure(d)
        if failure is None and sig:
            failure = f"the container was killed by {files.signal_name(sig)} ({sig})"
        return ContainerState("exited", exit_code=code, failure=failure, log_tail=self._tail(d),
                              started_at=d.get("started_at"), ended_at=ended.get("ended_at"), stage=files.stage(d))

    @staticmethod
    def _tail(d: Mapping[str, Any]) -> str:
        return logfile.tail(d["log"])

    # ---- stop / remove ---------------------------------------------------------------------

    def _members(self, d: Mapping[str, Any]) -> list[procfs.ProcStat]:
        return procfs.session_members(d["pgid"], d["start_time"], f"{CONTAINER_MARKER_ENV}={d['dir']}")

    def stop(self, handle: Handle, *, force: bool = False) -> None:
        d = handle.data
        if os.path.exists(d["exit"]):
            return
        members = self._members(d)
        if not force:
            # The shim ignores SIGTERM; the program's process group gets it from the toolkit.
            # Without the container's group (its shim and toolkit killed behind our back) the
            # leftovers are signalled one by one.
            if any(m.pgid == d["pgid"] for m in members):
                targets = [-d["pgid"]]
            else:
                targets = [m.pid for m in members]
            for pid in targets:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            return
        for m in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(m.pid, signal.SIGKILL)
        self._wait_gone(d)
        self._reap()
        # The shim was killed too, so it cannot record the end: do it for it.
        _create_json(d["exit"], {"exit_code": None, "signal": int(signal.SIGKILL), "ended_at": time.time()})

    def _wait_gone(self, d: Mapping[str, Any], timeout: float = 2.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._reap()
            if not self._members(d):
                return
            time.sleep(0.01)

    def remove(self, handle: Handle) -> None:
        d = handle.data
        if self._members(d):
            self.stop(handle, force=True)
        self._revoke(d.get("s3_access_key_id"))
        opt_ml = d.get("opt_ml")
        if opt_ml:
            for sub in (("input", "data"), ("code",)):
                shutil.rmtree(os.path.join(opt_ml, *sub), ignore_errors=True)

    def close(self) -> None:
        if self.credentials is not None:
            self.credentials.close()

    # ---- logs ------------------------------------------------------------------------------

    def read_logs(self, handle: Handle, cursor: int = 0, limit: int = 10_000) -> LogPage:
        return logfile.read_page(handle.data["log"], cursor, limit)
