"""``events.k8s.io/v1`` Events are the core/v1 Events seen through other field names (one
storage, two API versions, as in Kubernetes)."""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]
_RENAMES = (("involvedObject", "regarding"), ("message", "note"), ("source", "deprecatedSource"),
            ("firstTimestamp", "deprecatedFirstTimestamp"), ("lastTimestamp", "deprecatedLastTimestamp"),
            ("count", "deprecatedCount"), ("reportingComponent", "reportingController"))


def to_v1(core: Obj) -> Obj:
    out = copy.deepcopy(core)
    for old, new in _RENAMES:
        if old in out:
            out[new] = out.pop(old)
    out["apiVersion"], out["kind"] = "events.k8s.io/v1", "Event"
    out.setdefault("eventTime", None)  # legacy events have none, on a real server too
    return out


def from_v1(event: Obj) -> Obj:
    out = copy.deepcopy(event)
    for old, new in _RENAMES:
        if new in out:
            out[old] = out.pop(new)
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out


def field_alias(selector: str | None) -> str | None:
    """events.k8s.io field selectors name ``regarding.*``; the storage names ``involvedObject.*``."""
    if not selector:
        return selector
    return (selector.replace("regarding.", "involvedObject.").replace("note", "message")
            .replace("reportingController", "reportingComponent"))
