"""The rule container's outputs: ``result.json`` (written once, at the end) and ``heartbeat.json``
(rewritten every few seconds while the rule runs), both put atomically through an ObjectStore.

Non-finite numbers are written as the strings ``"nan"``, ``"inf"``, ``"-inf"`` so the files stay
valid JSON (ExplodingTensor's value is often NaN).
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from murphy.rules.actions import Action
from murphy.rules.engine import Outcome
from murphy.rules.rule import Finding
from murphy.storage.base import ObjectStore

log = logging.getLogger(__name__)

RESULT_KEY = "result.json"
HEARTBEAT_KEY = "heartbeat.json"


def utc_now() -> str:
    """ISO 8601 UTC timestamp with milliseconds, e.g. ``2024-05-01T12:00:00.123Z``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def json_number(value: float | None) -> float | str | None:
    """``value`` as JSON can hold it: non-finite floats become ``"nan"``/``"inf"``/``"-inf"``."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else str(value)


def finding_dict(f: Finding) -> dict[str, Any]:
    return {"step": f.step, "message": f.message, "tensor": f.tensor, "value": json_number(f.value)}


def result_dict(
    outcome: Outcome,
    *,
    rule_name: str,
    rule_to_invoke: str | None,
    actions: Sequence[Action],
    started_at: str,
    training_job_name: str | None = None,
    base_trial: str | None = None,
) -> dict[str, Any]:
    """The ``result.json`` document. ``actions`` are those to carry out: only for IssuesFound."""
    return {
        "status": outcome.status,
        "rule_name": rule_name,
        "rule_to_invoke": rule_to_invoke,
        "training_job_name": training_job_name,
        "base_trial": base_trial,
        "step": outcome.step,
        "tensor": outcome.tensor,
        "value": json_number(outcome.value),
        "message": outcome.message,
        "reason": outcome.reason,
        "findings": [finding_dict(f) for f in outcome.findings],
        "actions": [a.to_json_dict() for a in actions] if outcome.status == "IssuesFound" else [],
        "steps_evaluated": outcome.steps_evaluated,
        "last_step": outcome.last_step,
        "started_at": started_at,
        "ended_at": utc_now(),
    }


def put_json(store: ObjectStore, key: str, doc: dict[str, Any]) -> None:
    store.put(key, (json.dumps(doc, indent=1, allow_nan=False) + "\n").encode("utf-8"))


class Heartbeat:
    """Rewrites ``heartbeat.json`` every ``interval`` seconds from a daemon thread.

    ``last_progress_at`` moves only when the engine reports progress (a step evaluated or a poll
    done), so the control plane can tell a rule that is alive but stuck inside one evaluation
    (``timestamp`` fresh, ``last_progress_at`` old) from a dead container (``timestamp`` old).
    """

    def __init__(self, store: ObjectStore, rule_name: str, interval: float) -> None:
        self.store = store
        self.rule_name = rule_name
        self.interval = interval
        self.last_step: int | None = None
        self.steps_evaluated = 0
        self.last_progress_at = utc_now()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def progress(self, last_step: int | None, steps_evaluated: int) -> None:
        """Engine callback: record progress (cheap; the thread does the writing)."""
        self.last_step = last_step
        self.steps_evaluated = steps_evaluated
        self.last_progress_at = utc_now()

    def write(self, status: str = "InProgress") -> None:
        doc = {
            "status": status,
            "rule_name": self.rule_name,
            "timestamp": utc_now(),
            "last_step": self.last_step,
            "steps_evaluated": self.steps_evaluated,
            "last_progress_at": self.last_progress_at,
            "pid": os.getpid(),
            "interval_s": self.interval,
        }
        with self._lock:
            try:
                put_json(self.store, HEARTBEAT_KEY, doc)
            except Exception:  # a missed beat must not kill the rule
                log.warning("could not write %s", HEARTBEAT_KEY, exc_info=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.write()

    def start(self) -> None:
        self.write()
        self._thread = threading.Thread(target=self._loop, name="murphy-heartbeat", daemon=True)
        self._thread.start()

    def stop(self, final_status: str) -> None:
        """Stop beating and write a last heartbeat carrying the final status."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(1.0, self.interval))
        self.write(final_status)

