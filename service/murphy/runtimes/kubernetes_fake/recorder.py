"""core/v1 Events as the kubelet, scheduler and Job controller write them."""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

from murphy.runtimes.kubernetes_fake.kinds import BY_KEY
from murphy.runtimes.kubernetes_fake.store import Obj, Store, now_iso

NODE = "murphy-fake-node"


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
    event = {"metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": ns},
             "involvedObject": involved, "reason": reason, "message": message, "source": source,
             "firstTimestamp": ts, "lastTimestamp": ts, "count": 1, "type": type_, "eventTime": None,
             "reportingComponent": component, "reportingInstance": NODE if component == "kubelet" else ""}
    # An event is best effort, as in Kubernetes (the namespace may be going away).
    with contextlib.suppress(Exception):
        store.create(BY_KEY["events"], ns, event)
