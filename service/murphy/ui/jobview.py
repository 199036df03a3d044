"""A job as the dashboard shows it: DescribeTrainingJob's body plus what SageMaker only gives as
text, as fields: each rule's fired step, triggering tensor and value, its parameters, and how
far it has evaluated (from its ``result.json`` or live ``heartbeat.json``)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from murphy.jobs.describe import describe
from murphy.jobs.model import JobRecord, RuleState
from murphy.storage.base import ObjectStore
from murphy.ui.downsample import encode

_AT_STEP = re.compile(r"\bat step (\d+)")
_TENSOR = re.compile(r"\btensor (\S+)")


def _number(v: Any) -> float | str | None:
    if v is None:
        return None
    try:
        return encode(float(v))
    except (TypeError, ValueError):
        return None


class HeartbeatReader:
    """Rule heartbeats, read at most once per ``ttl`` seconds per rule (each may be an S3 GET)."""

    def __init__(self, open_store: Callable[[str], ObjectStore], ttl: float = 1.0) -> None:
        self._open = open_store
        self._ttl = ttl
        self._seen: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._stores: dict[str, ObjectStore] = {}
        self._lock = threading.Lock()

    def read(self, uri: str) -> dict[str, Any] | None:
        if not uri:
            return None
        now = time.monotonic()
        with self._lock:
            hit = self._seen.get(uri)
            if hit is not None and now - hit[0] < self._ttl:
                return hit[1]
        try:
            store = self._stores.get(uri)
            if store is None:  # an S3 store builds a client: once per rule location
                store = self._stores[uri] = self._open(uri)
            doc = json.loads(store.get("heartbeat.json"))
            beat = doc if isinstance(doc, dict) else None
        except Exception:  # no heartbeat yet, or unreadable: show no progress, do not fail the page
            beat = None
        with self._lock:
            if len(self._seen) > 4096:
                self._seen.clear()
                self._stores.clear()
            self._seen[uri] = (now, beat)
        return beat


def rule_row(record: JobRecord, rule: RuleState, beat: dict[str, Any] | None) -> dict[str, Any]:
    result = rule.result or {}
    cfgs = record.spec.get("DebugRuleConfigurations" if rule.kind == "debug" else "ProfilerRuleConfigurations") or []
    cfg: dict[str, Any] = next((c for c in cfgs if c.get("RuleConfigurationName") == rule.name), {})
    details = rule.details or ""
    step = result.get("step")
    if step is None and rule.status.value == "IssuesFound":
        m = _AT_STEP.search(details)
        step = int(m.group(1)) if m else None
    tensor = result.get("tensor")
    if tensor is None and rule.status.value == "IssuesFound":
        m = _TENSOR.search(details)
        tensor = m.group(1) if m else None
    evaluated = result.get("last_step")
    if evaluated is None and beat is not None:
        evaluated = beat.get("last_step")
    return {
        "name": rule.name, "kind": rule.kind, "status": rule.status.value, "details": details,
        "step": step, "tensor": tensor, "value": _number(result.get("value")),
        "parameters": dict(cfg.get("RuleParameters") or {}),
        "evaluated_step": evaluated,
        "steps_evaluated": result.get("steps_evaluated", beat.get("steps_evaluated") if beat else None),
        "findings": [
            {"step": f.get("step"), "tensor": f.get("tensor"), "value": _number(f.get("value")),
             "message": f.get("message")}
            for f in result.get("findings") or [] if isinstance(f, dict)
        ],
        "last_modified": rule.last_modified,
    }


def job_json(record: JobRecord, beats: HeartbeatReader, last_step: int | None) -> dict[str, Any]:
    """The Job page's document. ``last_step``: the last saved step (for each rule's lag)."""
    body = describe(record)
    rules = [rule_row(record, r, beats.read(r.result_uri) if not r.result else None) for r in record.rules]
    for r in rules:
        r["lag"] = (last_step - r["evaluated_step"]) if last_step is not None and isinstance(r["evaluated_step"], int) else None
    markers = [{"step": r["step"], "label": f"{r['name']}: {r['status']}", "kind": "finding"}
               for r in rules if r["step"] is not None]
    stop_reason = next((t.message for t in reversed(record.transitions)
                        if t.status.value in ("Stopping", "Stopped")), None)
    if record.is_terminal() and last_step is not None:
        markers.append({"step": last_step, "label": f"job {record.status.value}", "kind": "event"})
    return {"job": body, "rules": rules, "markers": markers, "stop_reason": stop_reason,
            "last_step": last_step, "terminal": record.is_terminal()}


def job_row(record: JobRecord) -> dict[str, Any]:
    """A Jobs-page row."""
    res = record.spec.get("ResourceConfig", {})
    end = record.training_end_time
    start = record.training_start_time
    duration = (end if end is not None else time.time()) - start if start is not None else None
    return {
        "name": record.name, "status": record.status.value, "secondary": record.secondary.value,
        "created": record.creation_time, "duration": duration,
        "instance_type": res.get("InstanceType"), "instance_count": res.get("InstanceCount"),
        "rules": [{"name": r.name, "status": r.status.value,
                   "step": (r.result or {}).get("step")} for r in record.rules],
        "modified": record.last_modified_time,
    }
