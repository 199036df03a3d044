"""What the Docker runtime asks the engine for: pure functions from a plan to ``create`` arguments.

Kept apart from :mod:`murphy.runtimes.docker` so the isolation, resource and environment rules
are unit-tested without an engine. Isolation by default (``docs/runtimes.md``): no network, a
read-only root filesystem with writable ``/opt/ml`` and ``/tmp``, every capability dropped,
``no-new-privileges``, a pids limit, a non-root user, tini as PID 1 (signals reach the program,
zombies are reaped).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes.base import Plan, RulePlan, TrainingPlan
from murphy.runtimes.base import (
    runtime_id as runtime_id,  # names and labels carry it (moved to base)
)
from murphy.runtimes.cluster import HOSTS_FILE
from murphy.runtimes.instances import InstanceSpec, instance_spec
from murphy.storage import gateway

#: Where things are inside a container.
OPT_ML = "/opt/ml"
RUN_DIR = "/run/murphy"
STAGE_FILE = f"{RUN_DIR}/stage.json"
BUCKETS = "/murphy/buckets"
GATEWAY_DIR = "/run/murphy-gateway"
GATEWAY_SOCKET_NAME = "s3.sock"
LOOPBACK_ENDPOINT = f"http://127.0.0.1:{gateway.DEFAULT_PORT}"
IMAGE_USER = "1000:1000"

LABEL_PREFIX = "io.murphy."
#: Variables of the service's environment a container gets: credentials and region for S3.
#: Paths (AWS_CONFIG_FILE, ...) and endpoints are the host's and mean nothing inside.
_PASSED_AWS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION")


@dataclass(frozen=True)
class StoreAccess:
    """How containers reach ``s3://`` URIs: local buckets (a host directory) or an endpoint."""

    buckets_dir: str | None = None
    endpoint_url: str | None = None
    #: Host directory holding the gateway's socket (network ``none`` with an http endpoint).
    gateway_dir: str | None = None


@dataclass(frozen=True)
class HostLimits:
    """What the engine's host has: instance types are clamped to it."""

    cpus: int
    memory_bytes: int
    gpus_available: bool = False


@dataclass(frozen=True)
class DockerOptions:
    network: str = "none"
    pids_limit: int = 1024
    user: str = IMAGE_USER
    #: A cap on every container's memory below the host's (None: the host's memory).
    max_memory_bytes: int | None = None
    #: Extra labels on every container (the runtime's identity).
    labels: Mapping[str, str] = field(default_factory=dict)


def container_name(rid: str, plan_name: str) -> str:
    return f"murphy-{rid}-{plan_name}"


def labels(plan: Plan, rid: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    out = {
        f"{LABEL_PREFIX}runtime": rid,
        f"{LABEL_PREFIX}container": plan.container_name,
        f"{LABEL_PREFIX}job": plan.job_name,
        f"{LABEL_PREFIX}role": plan.role,
        f"{LABEL_PREFIX}account": plan.account,
        f"{LABEL_PREFIX}region": plan.region,
    }
    if isinstance(plan, RulePlan):
        out[f"{LABEL_PREFIX}rule"] = plan.rule_name
    out.update(extra or {})
    return out


def instance_for(plan: Plan) -> tuple[str, InstanceSpec]:
    itype = plan.instance_type or "ml.m5.xlarge"
    spec = instance_spec(itype)
    if spec is None:
        raise RuntimeBackendError(f"instance type {itype!r} is not in murphy's instance table (docs/instance-types.md)")
    return itype, spec


def resources(itype: str, spec: InstanceSpec, host: HostLimits) -> dict[str, Any]:
    """CPU, memory and device arguments for ``itype`` on ``host``.

    CPUs and memory are clamped to what the host has (an ``ml.p4d.24xlarge`` on a laptop gets
    the laptop); accelerators are not: a job that asks for GPUs the host cannot give fails at
    launch with a reason, rather than training for hours on the CPU."""
    if spec.accelerator_kind == "neuron":
        raise RuntimeBackendError(
            f"instance type {itype} has {spec.accelerators} {spec.accelerator_name} device(s); murphy's Docker "
            "runtime cannot give a container AWS Neuron devices. Use a GPU (ml.p*, ml.g*) or CPU instance type.")
    cpus = max(0.01, min(float(spec.vcpus), float(host.cpus)))
    memory = min(int(spec.memory_gib * (1 << 30)), host.memory_bytes)
    out: dict[str, Any] = {
        "nano_cpus": int(cpus * 1e9),
        "mem_limit": memory,
        "memswap_limit": memory,  # no swap: an instance has none, and OOM must show as OOM
        # DataLoader workers share tensors through /dev/shm; Docker's 64 MiB default breaks them.
        "shm_size": max(64 << 20, memory // 4),
    }
    if spec.accelerator_kind == "gpu" and spec.accelerators:
        from docker.types import DeviceRequest

        out["device_requests"] = [DeviceRequest(count=spec.accelerators, capabilities=[["gpu"]])]
    return out


def store_env(store: StoreAccess, network: str) -> dict[str, str]:
    """Variables that make ``s3://`` resolve inside the container the way it does in the service."""
    if store.buckets_dir:
        return {"MURPHY_S3_LOCAL_ROOT": BUCKETS}
    if store.endpoint_url and network == "none":
        return {
            gateway.SOCKET_ENV: f"{GATEWAY_DIR}/{GATEWAY_SOCKET_NAME}",
            gateway.PORT_ENV: str(gateway.DEFAULT_PORT),
            "MURPHY_S3_ENDPOINT_URL": LOOPBACK_ENDPOINT,
            "AWS_ENDPOINT_URL_S3": LOOPBACK_ENDPOINT,
        }
    if store.endpoint_url:
        return {"MURPHY_S3_ENDPOINT_URL": store.endpoint_url, "AWS_ENDPOINT_URL_S3": store.endpoint_url}
    return {}


def passed_env(environ: Mapping[str, str]) -> dict[str, str]:
    out = {k: environ[k] for k in _PASSED_AWS if k in environ}
    for k in ("LANG", "TZ"):
        if k in environ:
            out[k] = environ[k]
    return out


def volumes(plan: Plan, container_dir: str, store: StoreAccess,
            bucket_mounts: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, dict[str, str]]:
    """The container's bind mounts. With local buckets, ``bucket_mounts``: only the container's
    granted prefixes under ``/murphy/buckets`` (:func:`murphy.runtimes.docker_grants.bucket_mounts`),
    never the whole directory (other jobs' data)."""
    out: dict[str, dict[str, str]] = {}
    if isinstance(plan, TrainingPlan):
        out[os.path.join(container_dir, "opt", "ml")] = {"bind": OPT_ML, "mode": "rw"}
        out[os.path.join(container_dir, "run")] = {"bind": RUN_DIR, "mode": "rw"}
    if store.buckets_dir:
        out.update({host: dict(m) for host, m in (bucket_mounts or {}).items()})
    elif store.gateway_dir:
        out[store.gateway_dir] = {"bind": GATEWAY_DIR, "mode": "ro"}
    return out


def create_kwargs(plan: Plan, *, image: str, name: str, env: Mapping[str, str], container_dir: str,
                  store: StoreAccess, host: HostLimits, options: DockerOptions, rid: str,
                  bucket_mounts: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """Arguments for ``client.containers.create``."""
    itype, spec = instance_for(plan)
    kwargs: dict[str, Any] = {
        "image": image,
        "name": name,
        "detach": True,
        "environment": dict(env),
        "labels": labels(plan, rid, {**options.labels, f"{LABEL_PREFIX}instance-type": itype}),
        "volumes": volumes(plan, container_dir, store, bucket_mounts),
        "tmpfs": {"/tmp": "rw,nosuid,nodev,exec"},
        "read_only": True,
        "network_mode": options.network,
        "user": options.user,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "pids_limit": options.pids_limit,
        "init": True,
        "stdin_open": False,
        "tty": False,
    }
    if options.max_memory_bytes:
        host = HostLimits(host.cpus, min(host.memory_bytes, options.max_memory_bytes), host.gpus_available)
    kwargs.update(resources(itype, spec, host))
    if isinstance(plan, TrainingPlan):
        extra = cluster_kwargs(plan, rid, options.network, os.path.join(container_dir, HOSTS_FILE))
        kwargs["volumes"].update(extra.pop("volumes", {}))
        kwargs.update(extra)
    return kwargs


def cluster_kwargs(plan: TrainingPlan, rid: str, network: str, hosts_file: str) -> dict[str, Any]:
    """What a host of a multi-instance job changes in ``create``'s arguments (none for one
    host): ``algo-1`` is named so and keeps the job's network (``none``: only ``lo``); the
    other hosts join its network namespace, so they reach each other over that loopback and
    still nothing else; ``hosts_file`` (mounted at ``/etc/hosts``) names every host there."""
    if len(plan.hosts) < 2:
        return {}
    out: dict[str, Any] = {"volumes": {hosts_file: {"bind": "/etc/hosts", "mode": "ro"}}}
    if network != "none":
        return out  # the host's network: hosts are loopback addresses there (docs/runtimes.md)
    if plan.host_index == 1:
        out["hostname"] = plan.current_host
    else:
        # Docker refuses a hostname of its own to a container in another's network namespace.
        out["network_mode"] = f"container:{container_name(rid, plan.first_host_container)}"
    return out


def host_gateway_env(env: Mapping[str, str], host_index: int) -> dict[str, str]:
    """Hosts sharing one loopback each serve the S3 gateway on their own port (47113 + i - 1)."""
    if gateway.PORT_ENV not in env or host_index == 1:
        return {}
    port = gateway.DEFAULT_PORT + host_index - 1
    url = f"http://127.0.0.1:{port}"
    return {gateway.PORT_ENV: str(port), "MURPHY_S3_ENDPOINT_URL": url, "AWS_ENDPOINT_URL_S3": url}


def cpus_for(plan: Plan, host: HostLimits) -> tuple[int, int]:
    """``(cpus, gpus)`` the container gets, for ``SM_NUM_CPUS`` / ``SM_NUM_GPUS``."""
    _, spec = instance_for(plan)
    gpus = spec.accelerators if spec.accelerator_kind == "gpu" else 0
    return max(1, min(spec.vcpus, host.cpus)), gpus
