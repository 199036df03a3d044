"""The Docker runtime: each training job and rule evaluator is a real container on one engine.

``<root_dir>/<container_name>/`` on the service's host holds what murphy keeps about one
container (the same shape as the process runtime's)::

    handle.json   the Handle (for people; the job record has its own copy)
    opt/ml/...    bind-mounted at /opt/ml (training containers)
    run/          bind-mounted at /run/murphy (the toolkit's stage file)
    log.jsonl     the container's log, copied from the engine (it goes away with the container)
    logstate.json how far the copy got

Containers are named ``murphy-<runtime id>-<container name>`` and labelled ``io.murphy.*``
(runtime id, job, role, rule, account, region, instance type), so ``launch`` is idempotent on
the name and a restarted service re-attaches through the container id in each job's Handle.
How isolation, resources and the S3 gateway are set up: :mod:`murphy.runtimes.docker_spec`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import docker
import docker.errors
from docker.models.containers import Container

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes import docker_spec as spec
from murphy.runtimes import files, logfile, s3_access
from murphy.runtimes.base import (
    ContainerState,
    FoundContainer,
    Handle,
    JobCredentials,
    LogPage,
    Plan,
    RulePlan,
    TrainingPlan,
    scoped_environment,
)
from murphy.runtimes.catalog import CatalogEntry, ImageCatalog
from murphy.runtimes.cluster import container_network
from murphy.runtimes.docker_grants import bucket_mounts, grant_ownership
from murphy.runtimes.docker_logs import rfc3339_ns, sync_logs
from murphy.runtimes.layout import ContainerView, rule_env, write_training_layout
from murphy.storage import gateway

log = logging.getLogger(__name__)
_IN_IMAGE_PYTHON = "python"
#: The container's S3 access key (revoked when the container is removed, found again on re-attach).
_KEY_LABEL = f"{spec.LABEL_PREFIX}s3-key"


def _epoch(ts: str | None) -> float | None:
    """Docker's RFC 3339 timestamps (``0001-01-01T00:00:00Z`` = never) as epoch seconds."""
    if not ts or ts.startswith("0001-"):
        return None
    try:
        return rfc3339_ns(ts) / 1e9
    except ValueError:
        return None


class DockerRuntime:
    """:class:`~murphy.runtimes.base.Runtime` over a Docker engine (see the module docstring)."""

    def __init__(self, root_dir: Path, catalog: ImageCatalog, store: spec.StoreAccess, *,
                 options: spec.DockerOptions | None = None, docker_host: str | None = None,
                 client: docker.DockerClient | None = None, environ: Mapping[str, str] | None = None,
                 name: str = "docker", credentials: JobCredentials | None = None) -> None:
        self.root_dir = Path(root_dir)
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self.catalog = catalog
        self.name = name
        self.rid = spec.runtime_id(str(self.root_dir))
        self.options = options or spec.DockerOptions(user=default_user())
        self._docker_host = docker_host
        self._client = client
        self._host: spec.HostLimits | None = None
        self._environ = dict(os.environ if environ is None else environ)
        self._gateway: gateway.Forwarder | None = None
        #: Per-container S3 credentials (murphy's S3 gateway, docs/security.md); None: the service's own.
        self.credentials = credentials
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.store, self._gateway = s3_access.store_access(store, self.options.network, self.root_dir, credentials)

    # ---- engine ----------------------------------------------------------------------------

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            try:
                if self._docker_host:
                    self._client = docker.DockerClient(base_url=self._docker_host, version="auto")
                else:
                    self._client = docker.from_env(version="auto")
            except docker.errors.DockerException as e:
                raise RuntimeBackendError(f"cannot reach the Docker engine ({self._docker_host or 'DOCKER_HOST'}): {e}") from e
        return self._client

    def host(self) -> spec.HostLimits:
        if self._host is None:
            info = self.client.info()
            self._host = spec.HostLimits(
                cpus=int(info.get("NCPU") or os.cpu_count() or 1),
                memory_bytes=int(info.get("MemTotal") or 1 << 30),
                gpus_available="nvidia" in (info.get("Runtimes") or {}),
            )
        return self._host

    def close(self) -> None:
        if self.credentials is not None:
            self.credentials.close()
        if self._gateway is not None:
            self._gateway.close()
            self._gateway = None

    # ---- launch ----------------------------------------------------------------------------

    def _entry(self, plan: Plan) -> CatalogEntry:
        hps = plan.hyperparameters if isinstance(plan, TrainingPlan) else None
        try:
            return self.catalog.resolve(plan.image, hps)
        except RuntimeBackendError:
            # Not in the catalog: a local image run as it is (bring your own container).
            if isinstance(plan, TrainingPlan):
                return CatalogEntry(plan.image, "script-mode", (), "a local image, run as is")
            return CatalogEntry(plan.image, "rule-evaluator", (), "a local image, run as is")

    def launch(self, plan: Plan) -> Handle:
        entry = self._entry(plan)
        if isinstance(plan, TrainingPlan) and entry.kind == "rule-evaluator":
            raise RuntimeBackendError(f"image {plan.image!r} is a rule evaluator; it cannot run a training job")
        if isinstance(plan, RulePlan) and entry.kind != "rule-evaluator":
            raise RuntimeBackendError(f"image {plan.image!r} is a training image; it cannot evaluate rules")
        image = entry.docker_image or plan.image
        cdir = self.root_dir / plan.container_name
        cdir.mkdir(parents=True, exist_ok=True)
        name = spec.container_name(self.rid, plan.container_name)
        with files.exclusive(cdir):
            existing = self._find(name)
            if existing is not None:
                if existing.status == "created":  # a launch that died between create and start
                    self._start(existing, plan, name, {})
                handle = self._handle(plan, cdir, name, existing.id or "")
                handle.data["s3_access_key_id"] = (existing.labels or {}).get(_KEY_LABEL)
                return handle
            return self._create(plan, entry, image, cdir, name)

    def _find(self, name: str) -> Container | None:
        try:
            return self.client.containers.get(name)
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as e:
            raise RuntimeBackendError(f"Docker engine error looking up {name}: {e.explanation or e}") from e

    def _handle(self, plan: Plan, cdir: Path, name: str, cid: str) -> Handle:
        return self._handle_of(plan.container_name, plan.role, plan.instance_type or "ml.m5.xlarge", cdir, name, cid)

    def _handle_of(self, container_name: str, role: str, instance_type: str, cdir: Path, name: str, cid: str) -> Handle:
        d = str(cdir)
        data: dict[str, Any] = {
            "container_name": container_name, "docker_name": name, "role": role, "dir": d,
            "log": os.path.join(d, "log.jsonl"), "log_state": os.path.join(d, "logstate.json"),
            "stage": os.path.join(d, "run", "stage.json"), "instance_type": instance_type,
        }
        if role == "training":
            data["opt_ml"] = os.path.join(d, "opt", "ml")
            data["failure"] = os.path.join(d, "opt", "ml", "output", "failure")
        return Handle(runtime=self.name, id=cid, data=data)

    def _environment(self, plan: Plan, entry: CatalogEntry, cdir: Path) -> dict[str, str]:
        base = spec.store_env(self.store, self.options.network)
        inherited = spec.passed_env(self._environ)
        if isinstance(plan, RulePlan):
            return rule_env(plan, base, inherited)
        (cdir / "run").mkdir(exist_ok=True)
        (cdir / "run" / "stage.json").unlink(missing_ok=True)  # from a launch that died before its container
        cpus, gpus = spec.cpus_for(plan, self.host())
        base = {**base, **spec.host_gateway_env(base, plan.host_index)}
        network = container_network(plan.hosts, str(cdir), str(self.root_dir / plan.first_host_container), self.options.network)
        view = ContainerView(spec.OPT_ML, spec.STAGE_FILE, inherited, cpus, gpus, network)
        _, env = write_training_layout(str(cdir), plan, entry, _IN_IMAGE_PYTHON, base, view=view)
        return env

    def _create(self, plan: Plan, entry: CatalogEntry, image: str, cdir: Path, name: str) -> Handle:
        env = self._environment(plan, entry, cdir)
        key_id = None
        if self.credentials is not None:
            # The endpoint the container's environment already names (each host of a cluster has its own port).
            creds = self.credentials.issue(plan, env.get("AWS_ENDPOINT_URL_S3"))
            env, key_id = scoped_environment(env, creds), creds.access_key_id
        try:
            return self._create_with(plan, image, cdir, name, env, key_id)
        except BaseException:
            if key_id is not None and self.credentials is not None:
                self.credentials.revoke(key_id)
            raise

    def _create_with(self, plan: Plan, image: str, cdir: Path, name: str, env: dict[str, str],
                     key_id: str | None) -> Handle:
        # Local buckets: the job's own prefixes only (made first, then handed to the container's user).
        mounts = bucket_mounts(plan, self.store.buckets_dir) if self.store.buckets_dir else None
        grant_ownership(plan, cdir, self.options.user, mounts)
        kwargs = spec.create_kwargs(plan, image=image, name=name, env=env, container_dir=str(cdir),
                                    store=self.store, host=self.host(), options=self.options, rid=self.rid,
                                    bucket_mounts=mounts)
        if key_id is not None:
            kwargs["labels"][_KEY_LABEL] = key_id
        try:
            container = self.client.containers.create(**kwargs)
        except docker.errors.ImageNotFound as e:
            raise RuntimeBackendError(
                f"image {image!r} (for {plan.image!r}) is not on this Docker host; build murphy's images with "
                f"`make images`, or map the image in MURPHY_IMAGE_CATALOG (docs/runtimes.md): {e.explanation or e}"
            ) from e
        except docker.errors.APIError as e:
            raise RuntimeBackendError(f"cannot create container {name}: {e.explanation or e}") from e
        handle = self._handle(plan, cdir, name, container.id or "")
        handle.data["s3_access_key_id"] = key_id
        self._start(container, plan, name, kwargs)
        doc = {"runtime": handle.runtime, "id": handle.id, "data": handle.data}
        Path(handle.data["dir"], "handle.json").write_text(json.dumps(doc), encoding="utf-8")
        return handle

    def _start(self, container: Container, plan: Plan, name: str, kwargs: Mapping[str, Any]) -> None:
        try:
            container.start()
        except docker.errors.APIError as e:
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
            hint = ""
            if "device_requests" in kwargs and not self.host().gpus_available:
                hint = (f" ({plan.instance_type} asks for GPUs; this Docker host has no NVIDIA container runtime, "
                        "see docs/gpu.md)")
            raise RuntimeBackendError(f"cannot start container {name}: {e.explanation or e}{hint}") from e

    # ---- status ----------------------------------------------------------------------------

    def _inspect(self, handle: Handle) -> dict[str, Any] | None:
        try:
            attrs: dict[str, Any] = self.client.api.inspect_container(handle.id)
            return attrs
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as e:
            raise RuntimeBackendError(f"Docker engine error inspecting {handle.data.get('docker_name')}: {e}") from e

    def status(self, handle: Handle) -> ContainerState:
        d = handle.data
        attrs = self._inspect(handle)
        if attrs is None:
            return ContainerState(
                "missing", failure="the container vanished (removed outside murphy, or the Docker engine lost it)",
                log_tail=logfile.tail(d["log"]), stage=files.stage(d))
        st = attrs.get("State") or {}
        started, ended = _epoch(st.get("StartedAt")), _epoch(st.get("FinishedAt"))
        status = st.get("Status")
        if status == "created":
            return ContainerState("pending", stage=files.stage(d))
        if st.get("Running") or status in ("running", "restarting", "paused"):
            return ContainerState("running", started_at=started, stage=files.stage(d))
        code = st.get("ExitCode")
        self._sync(handle)
        failure = files.failure(d)
        if st.get("OOMKilled"):
            failure = (f"OutOfMemoryError: the container ran out of memory (limit {_gib(attrs)} for "
                       f"{d.get('instance_type')}); use an instance type with more memory or use less. "
                       + (failure or "")).strip()
        elif failure is None and st.get("Error"):
            failure = str(st["Error"])
        elif failure is None and isinstance(code, int) and code > 128:
            failure = f"the container was killed by {files.signal_name(code - 128)} ({code - 128})"
        return ContainerState("exited", exit_code=code, failure=failure, log_tail=logfile.tail(d["log"]),
                              started_at=started, ended_at=ended, stage=files.stage(d))

    # ---- list ------------------------------------------------------------------------------

    def list_containers(self, job_name: str | None = None) -> list[FoundContainer]:
        """Every container of this runtime id the engine has (``docker ps -a`` by label)."""
        want = [f"{spec.LABEL_PREFIX}runtime={self.rid}"]
        if job_name is not None:
            want.append(f"{spec.LABEL_PREFIX}job={job_name}")
        try:
            found = self.client.api.containers(all=True, filters={"label": want})
        except docker.errors.APIError as e:
            raise RuntimeBackendError(f"Docker engine error listing murphy's containers: {e.explanation or e}") from e
        out = []
        for c in found:
            labels = c.get("Labels") or {}
            cname = labels.get(f"{spec.LABEL_PREFIX}container", "")
            role: Literal["training", "rule"] = "rule" if labels.get(f"{spec.LABEL_PREFIX}role") == "rule" else "training"
            state = c.get("State")
            phase: Literal["pending", "running", "exited"] = (
                "pending" if state == "created" else "exited" if state in ("exited", "dead", "removing") else "running")
            handle = self._handle_of(cname, role, labels.get(f"{spec.LABEL_PREFIX}instance-type", "ml.m5.xlarge"),
                                     self.root_dir / cname, spec.container_name(self.rid, cname), c["Id"])
            # The container's own S3 key, so that removing an orphan revokes it (as a re-attach does).
            handle.data["s3_access_key_id"] = labels.get(_KEY_LABEL)
            out.append(FoundContainer(handle, labels.get(f"{spec.LABEL_PREFIX}job", ""), cname, role, phase))
        return out

    # ---- stop / remove ---------------------------------------------------------------------

    def stop(self, handle: Handle, *, force: bool = False) -> None:
        try:
            self.client.api.kill(handle.id, signal="SIGKILL" if force else "SIGTERM")
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as e:
            if e.response is not None and e.response.status_code == 409:
                # Not running: exited, or created and never started (a launch that died between
                # create and start). Such a one must never start now: it goes.
                attrs = self._inspect(handle)
                if attrs is not None and (attrs.get("State") or {}).get("Status") == "created":
                    with contextlib.suppress(docker.errors.NotFound):
                        self.client.api.remove_container(handle.id, force=True)
                return
            raise RuntimeBackendError(f"cannot signal {handle.data.get('docker_name')}: {e.explanation or e}") from e
        if force:
            self._wait_exited(handle)

    def _wait_exited(self, handle: Handle, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.status(handle).phase != "running":
                return
            time.sleep(0.02)

    def remove(self, handle: Handle) -> None:
        self._sync(handle)
        try:
            self.client.api.remove_container(handle.id, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            log.warning("cannot remove container %s: %s", handle.data.get("docker_name"), e)
        if self.credentials is not None and handle.data.get("s3_access_key_id"):
            self.credentials.revoke(handle.data["s3_access_key_id"])
        opt_ml = handle.data.get("opt_ml")
        if opt_ml:
            for sub in (("input", "data"), ("code",)):
                shutil.rmtree(os.path.join(opt_ml, *sub), ignore_errors=True)

    # ---- logs ------------------------------------------------------------------------------

    def _sync(self, handle: Handle) -> None:
        with self._log_lock(handle):
            try:
                sync_logs(self.client.api, handle.id, handle.data["log"], handle.data["log_state"])
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as e:
                log.warning("cannot copy the log of %s: %s", handle.data.get("docker_name"), e)

    def _log_lock(self, handle: Handle) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(handle.data["log"], threading.Lock())

    def read_logs(self, handle: Handle, cursor: int = 0, limit: int = 10_000) -> LogPage:
        self._sync(handle)
        return logfile.read_page(handle.data["log"], cursor, limit)


def _gib(attrs: Mapping[str, Any]) -> str:
    mem = (attrs.get("HostConfig") or {}).get("Memory") or 0
    return f"{mem / (1 << 30):.3g} GiB" if mem else "none"


def default_user() -> str:
    """The images' own non-root user when the service is root; else the service's uid:gid."""
    if os.geteuid() == 0:
        return spec.IMAGE_USER
    return f"{os.getuid()}:{os.getgid()}"
