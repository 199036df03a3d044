"""Events as the kubelet, scheduler and Job controller write them. The kubelet and the Job
controller still use the legacy core/v1 recorder (``firstTimestamp``/``lastTimestamp``/``count``,
``eventTime: null``); the scheduler uses events.k8s.io/v1 (``eventTime`` and ``action`` set, the
legacy timestamps null), as in Kubernetes 1.31 (kubernetes/kubernetes#90482, #129135). So a
client listing events.k8s.io/v1 Events meets ``eventTime: null`` on the kubelet's events, and one
listing core/v1 Events meets ``lastTimestamp: null`` on the scheduler's."""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import datetime, timezone
from typing import Any

from murphy.runtimes.kubernetes_fake.kinds import BY_KEY
from murphy.runtimes.kubernetes_fake.store import Obj, Store, now_iso

NODE = "murphy-fake-node"


_last = [0]
_lock = threading.Lock()


def _name(obj_name: str) -> str:
    """``<object>.<hex of the time in ns>``, as client-go names events: they list in time order."""
    with _lock:
        ns = _last[0] = max(time.time_ns(), _last[0] + 1)
    return f"{obj_name}.{ns:x}"


def record(store: Store, obj: Obj, type_: str, reason: str, message: str, component: str,
           field_path: str | None = None) -> None:
    meta = obj["metadata"]
    ns = meta.get("namespace") or "default"
    ts = now_iso()
    involved: dict[str, Any] = {"kind": obj.get("kind"), "namespace": ns, "name": meta["name"], "uid": meta.get("uid"),
                                "apiVersion": obj.get("apiVersion"), "resourceVersion": meta.get("resourceVersion")}
    if field_path:
        involved["fieldPath"] = field_path
    source: dict[str, str] = {"component": component}
    if component == "kubelet":
        source["host"] = NODE
    event: dict[str, Any] = {"metadata": {"name": _name(meta["name"]), "namespace": ns},
                             "involvedObject": involved, "reason": reason, "message": message, "source": source,
                             "firstTimestamp": ts, "lastTimestamp": ts, "count": 1, "type": type_, "eventTime": None,
                             "reportingComponent": component, "reportingInstance": NODE if component == "kubelet" else ""}
    if component == "default-scheduler":
        micro = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        event.update(firstTimestamp=None, lastTimestamp=None, eventTime=micro, action="Binding" if reason == "Scheduled" else "Scheduling",
                     reportingInstance=f"default-scheduler-{NODE}")
        event.pop("count")
    # An event is best effort, as in Kubernetes (the namespace may be going away).
    with contextlib.suppress(Exception):
        store.create(BY_KEY["events"], ns, event)
