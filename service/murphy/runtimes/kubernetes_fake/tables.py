"""Server-side printing: the ``meta.k8s.io/v1`` Table ``kubectl get`` asks for (``Accept: ...;as=Table``),
with the columns a real API server prints for pods, Jobs, events and nodes (others: name and age)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from murphy.runtimes.kubernetes_fake.kinds import Kind
from murphy.runtimes.kubernetes_fake.store import Obj, parse_iso


def age(ts: str | None) -> str:
    if not ts:
        return "<unknown>"
    s = max(0, int(time.time() - parse_iso(ts)))
    if s < 120:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s < 600 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m" if s < 36000 else f"{s // 3600}h"
    return f"{s // 86400}d"


def _pod_status(p: Obj) -> str:
    st = p.get("status") or {}
    if p["metadata"].get("deletionTimestamp"):
        return "Terminating"
    reason = st.get("reason") or st.get("phase") or "Pending"
    for cs in [*(st.get("initContainerStatuses") or []), *(st.get("containerStatuses") or [])]:
        state = cs.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason") not in (None, "ContainerCreating", "PodInitializing"):
            return str(state["waiting"]["reason"])
    for cs in st.get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated")
        if term and st.get("phase") != "Running":
            reason = term.get("reason") or reason
    return str(reason)


def _pod(p: Obj) -> list[Any]:
    st = p.get("status") or {}
    cs = st.get("containerStatuses") or []
    total = len((p.get("spec") or {}).get("containers") or [])
    ready = sum(1 for c in cs if c.get("ready"))
    return [p["metadata"]["name"], f"{ready}/{total}", _pod_status(p), 0, age(p["metadata"].get("creationTimestamp")),
            st.get("podIP") or "<none>", (p.get("spec") or {}).get("nodeName") or "<none>"]


def _job(j: Obj) -> list[Any]:
    st, spec = j.get("status") or {}, j.get("spec") or {}
    conds = {c.get("type") for c in st.get("conditions") or [] if c.get("status") == "True"}
    status = next((c for c in ("Failed", "Complete", "Suspended", "FailureTarget", "SuccessCriteriaMet") if c in conds), "Running")
    status = {"FailureTarget": "FailureTarget", "SuccessCriteriaMet": "SuccessCriteriaMet"}.get(status, status)
    if j["metadata"].get("deletionTimestamp"):
        status = "Terminating"
    start, end = st.get("startTime"), st.get("completionTime")
    duration = age(start) if start and not end else (f"{int(parse_iso(end) - parse_iso(start))}s" if start and end else "")
    return [j["metadata"]["name"], status, f"{st.get('succeeded', 0)}/{spec.get('completions', 1)}", duration,
            age(j["metadata"].get("creationTimestamp"))]


def _event(e: Obj) -> list[Any]:
    inv = e.get("involvedObject") or {}
    return [age(e.get("lastTimestamp") or e.get("eventTime") or e["metadata"].get("creationTimestamp")), e.get("type"),
            e.get("reason"), f"{str(inv.get('kind', '')).lower()}/{inv.get('name')}", e.get("message")]


def _node(n: Obj) -> list[Any]:
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in (n.get("status") or {}).get("conditions") or [])
    return [n["metadata"]["name"], "Ready" if ready else "NotReady", "<none>", age(n["metadata"].get("creationTimestamp")),
            ((n.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")]


_COLUMNS: dict[str, tuple[list[tuple[str, str, int]], Callable[[Obj], list[Any]]]] = {
    "pods": ([("Name", "string", 0), ("Ready", "string", 0), ("Status", "string", 0), ("Restarts", "string", 0),
              ("Age", "string", 0), ("IP", "string", 1), ("Node", "string", 1)], _pod),
    "jobs": ([("Name", "string", 0), ("Status", "string", 0), ("Completions", "string", 0), ("Duration", "string", 0),
              ("Age", "date", 0)], _job),
    "events": ([("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0), ("Object", "string", 0),
                ("Message", "string", 0)], _event),
    "nodes": ([("Name", "string", 0), ("Status", "string", 0), ("Roles", "string", 0), ("Age", "string", 0),
               ("Version", "string", 0)], _node),
}


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def table(kind: Kind, items: list[Obj], resource_version: str, include: str | None) -> dict[str, Any]:
    columns, row = _COLUMNS.get(kind.key, ([("Name", "string", 0), ("Age", "string", 0)],
                                           lambda o: [o["metadata"]["name"], age(o["metadata"].get("creationTimestamp"))]))
    rows = []
    for o in items:
        r: dict[str, Any] = {"cells": row(o)}
        if include == "Object":
            r["object"] = {"apiVersion": kind.api_version, "kind": kind.kind, **o}
        elif include != "None":
            r["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}
        rows.append(r)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": [{"name": n, "type": t, "format": "name" if n == "Name" else "", "description": n,
                                   "priority": p} for n, t, p in columns],
            "rows": rows}
