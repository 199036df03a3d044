"""What a pod asks the scheduler for: instance type -> resources, node selector, tolerations.

The instance table (:mod:`murphy.runtimes.instances`) gives the machine; a pod must ask for less,
since a node's *allocatable* is below its capacity (kubelet, system daemons). By default a pod
requests the instance's vCPUs minus a reserve (0.5, or 1/16 of a large machine) and its memory
minus ``max(2 GiB, 5 %)``, with memory request = limit (an overcommitted node evicts the pod
last, and an OOM shows as the container's OOMKill), a CPU limit of the instance's vCPUs, and
accelerators in ``limits`` only (Kubernetes requires GPU requests to equal limits).

*Instance profiles* (like Kueue's ResourceFlavors) add placement, and may set the figures
themselves: the first profile whose ``pattern`` (fnmatch) matches the instance type applies.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes.instances import InstanceSpec, instance_spec

GPU_RESOURCE = "nvidia.com/gpu"
NEURON_RESOURCE = "aws.amazon.com/neuron"
DEFAULT_INSTANCE_TYPE = "ml.m5.xlarge"
_GIB = 1 << 30
_PROFILE_KEYS = {"pattern", "node_selector", "tolerations", "cpu", "memory"}


@dataclass(frozen=True)
class InstanceProfile:
    pattern: str
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: Sequence[Mapping[str, Any]] = ()
    #: Overrides of the computed request (a Kubernetes quantity: ``"3500m"``, ``"13Gi"``).
    cpu: str | None = None
    memory: str | None = None


#: Accelerator nodes are usually tainted so that only pods asking for them land there.
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
NEURON_TOLERATION = {"key": NEURON_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


@dataclass(frozen=True)
class PodResources:
    instance_type: str
    spec: InstanceSpec
    resources: dict[str, dict[str, str]]
    node_selector: dict[str, str]
    tolerations: list[dict[str, Any]]
    #: What the container reports as ``SM_NUM_CPUS`` / ``SM_NUM_GPUS``.
    num_cpus: int
    num_gpus: int
    memory_bytes: int


def default_cpu_millis(spec: InstanceSpec) -> int:
    reserve = max(500, spec.vcpus * 1000 // 16)
    return max(250, spec.vcpus * 1000 - reserve)


def default_memory_mib(spec: InstanceSpec) -> int:
    total = int(spec.memory_gib * 1024)
    return max(256, total - max(2048, total // 20))


def memory_bytes(quantity: str) -> int:
    """Bytes of a Kubernetes memory quantity (the binary and decimal suffixes murphy writes)."""
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    for suffix in sorted(units, key=len, reverse=True):
        if quantity.endswith(suffix):
            return int(float(quantity[: -len(suffix)]) * units[suffix])
    return int(float(quantity))


def profile_for(instance_type: str, profiles: Sequence[InstanceProfile]) -> InstanceProfile | None:
    return next((p for p in profiles if fnmatch.fnmatchcase(instance_type, p.pattern)), None)


def pod_resources(instance_type: str | None, profiles: Sequence[InstanceProfile] = ()) -> PodResources:
    """Resources and placement of a pod for ``instance_type`` (``ml.m5.xlarge`` when None)."""
    itype = instance_type or DEFAULT_INSTANCE_TYPE
    spec = instance_spec(itype)
    if spec is None:
        raise RuntimeBackendError(f"instance type {itype!r} is not in murphy's instance table (docs/instance-types.md)")
    profile = profile_for(itype, profiles)
    cpu = profile.cpu if profile and profile.cpu else f"{default_cpu_millis(spec)}m"
    memory = profile.memory if profile and profile.memory else f"{default_memory_mib(spec)}Mi"
    requests = {"cpu": cpu, "memory": memory}
    limits = {"cpu": str(spec.vcpus), "memory": memory}
    tolerations: list[dict[str, Any]] = []
    gpus = 0
    if spec.accelerators and spec.accelerator_kind == "gpu":
        gpus = spec.accelerators
        limits[GPU_RESOURCE] = str(gpus)
        tolerations.append(dict(GPU_TOLERATION))
    elif spec.accelerators and spec.accelerator_kind == "neuron":
        limits[NEURON_RESOURCE] = str(spec.accelerators)
        tolerations.append(dict(NEURON_TOLERATION))
    if profile:
        tolerations.extend(dict(t) for t in profile.tolerations if dict(t) not in tolerations)
    cpus = max(1, min(spec.vcpus, _cpu_millis(cpu) // 1000 or 1))
    return PodResources(itype, spec, {"requests": requests, "limits": limits},
                        dict(profile.node_selector) if profile else {}, tolerations, cpus, gpus, memory_bytes(memory))


def _cpu_millis(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def load_profiles(path: str | Path) -> list[InstanceProfile]:
    """Profiles from a JSON file: ``{"profiles": [{"pattern": "ml.g5.*", "node_selector": {...},
    "tolerations": [...], "cpu": "3", "memory": "12Gi"}, ...]}`` (or a bare list)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise RuntimeBackendError(f"instance profiles {path}: {err}") from err
    entries = doc.get("profiles") if isinstance(doc, dict) else doc
    if not isinstance(entries, list):
        raise RuntimeBackendError(f"instance profiles {path}: expected a list of profiles or {{\"profiles\": [...]}}")
    out = []
    for i, e in enumerate(entries):
        where = f"instance profiles {path}, entry {i}"
        if not isinstance(e, dict) or not isinstance(e.get("pattern"), str):
            raise RuntimeBackendError(f"{where}: each profile is an object with a string \"pattern\"")
        unknown = set(e) - _PROFILE_KEYS
        if unknown:
            raise RuntimeBackendError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(_PROFILE_KEYS)})")
        sel, tol = e.get("node_selector", {}), e.get("tolerations", [])
        if not isinstance(sel, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in sel.items()):
            raise RuntimeBackendError(f"{where}: \"node_selector\" maps strings to strings")
        if not isinstance(tol, list) or not all(isinstance(t, dict) for t in tol):
            raise RuntimeBackendError(f"{where}: \"tolerations\" is a list of objects")
        for k in ("cpu", "memory"):
            if k in e and not isinstance(e[k], str):
                raise RuntimeBackendError(f"{where}: \"{k}\" is a Kubernetes quantity string, such as \"4\" or \"12Gi\"")
        out.append(InstanceProfile(e["pattern"], sel, tuple(tol), e.get("cpu"), e.get("memory")))
    return out
