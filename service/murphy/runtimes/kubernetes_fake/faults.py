"""Scripted faults: what a test makes go wrong, for the runtime's failure-mapping tests.

A fault applies to a pod either through an annotation on the pod (so on a Job's pod template)::

    fake.murphy.io/fault: OOMKilled            # one or more kinds, comma-separated
    fake.murphy.io/fault-after: "1.5"          # seconds after the container started (runtime faults)
    fake.murphy.io/fault-message: "..."        # overrides the default message
    fake.murphy.io/fault-container: algo       # which container (default: the first)

or through a rule registered on the cluster (:meth:`Faults.add`; ``POST /fake/v1/faults``
with the same fields as JSON), matching pods by label selector and/or name prefix.

Kinds: ``Unschedulable`` (the scheduler's condition and FailedScheduling event),
``ErrImagePull`` (the pull fails for ever: ErrImagePull, then ImagePullBackOff),
``InvalidImageName``, ``CreateContainerConfigError``, ``OOMKilled`` (the container is killed,
exit 137, reason OOMKilled), ``Evicted`` (node pressure: the pod Failed, reason Evicted, a
DisruptionTarget condition ``TerminationByKubelet``), ``Preempted`` (DisruptionTarget
``PreemptionByScheduler``, then a graceful delete), ``EvictionByEvictionAPI`` (a drain: the same
with that reason).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from murphy.runtimes.kubernetes_fake.errors import bad_request
from murphy.runtimes.kubernetes_fake.selectors import label_selector

ANNOTATION = "fake.murphy.io/fault"
KINDS = ("Unschedulable", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError", "OOMKilled", "Evicted",
         "Preempted", "EvictionByEvictionAPI")
DEFAULT_MESSAGES = {
    "Unschedulable": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
                     "1 No preemption victims found for incoming pod.",
    "ErrImagePull": 'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": failed to resolve '
                    'reference "{image}": {image}: not found',
    "InvalidImageName": 'Failed to apply default image tag "{image}": couldn\'t parse image name "{image}": invalid reference format',
    "CreateContainerConfigError": "couldn't find key AWS_SECRET_ACCESS_KEY in Secret {namespace}/missing",
    "OOMKilled": "",
    "Evicted": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. Container {container} "
               "was using 2Gi, request is 1Gi, has larger consumption of memory.",
    "Preempted": "default-scheduler: preempting to accommodate a higher priority pod",
    "EvictionByEvictionAPI": "Eviction API: evicting",
}


@dataclass
class Fault:
    kind: str
    selector: str | None = None
    name_prefix: str | None = None
    container: str | None = None
    after_s: float = 0.0
    message: str | None = None
    #: How many pods it applies to (None: every matching pod).
    times: int | None = None
    hits: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise bad_request(f"unknown fault {self.kind!r}; kinds: {', '.join(KINDS)}")

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "selector": self.selector, "name_prefix": self.name_prefix,
                "container": self.container, "after_s": self.after_s, "message": self.message, "times": self.times,
                "pods": sorted(self.hits)}

    def text(self, **fmt: str) -> str:
        template = self.message if self.message is not None else DEFAULT_MESSAGES[self.kind]
        try:
            return template.format(**fmt)
        except (KeyError, IndexError, ValueError):
            return template


class Faults:
    def __init__(self) -> None:
        self._rules: list[Fault] = []
        self._lock = threading.Lock()

    def add(self, kind: str, **kw: Any) -> Fault:
        fault = Fault(kind, **kw)
        with self._lock:
            self._rules.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def rules(self) -> list[Fault]:
        with self._lock:
            return list(self._rules)

    def for_pod(self, pod: Mapping[str, Any], kinds: tuple[str, ...]) -> Fault | None:
        """The first fault of one of ``kinds`` that applies to ``pod`` (annotations first)."""
        meta = pod.get("metadata") or {}
        ann = meta.get("annotations") or {}
        for kind in (k.strip() for k in str(ann.get(ANNOTATION, "")).split(",") if k.strip()):
            if kind in kinds:
                return Fault(kind, container=ann.get(f"{ANNOTATION}-container"),
                             after_s=float(ann.get(f"{ANNOTATION}-after", 0) or 0),
                             message=ann.get(f"{ANNOTATION}-message"))
        uid = meta.get("uid", "")
        with self._lock:
            for f in self._rules:
                if f.kind not in kinds:
                    continue
                if f.name_prefix and not str(meta.get("name", "")).startswith(f.name_prefix):
                    continue
                if f.selector and not label_selector(f.selector)(pod):
                    continue
                if uid not in f.hits:
                    if f.times is not None and len(f.hits) >= f.times:
                        continue
                    f.hits.add(uid)
                return f
        return None
