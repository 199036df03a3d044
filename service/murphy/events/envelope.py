"""EventBridge envelopes: the wrapper every murphy event travels in.

``{"version": "0", "id", "detail-type", "source", "account", "time", "region", "resources",
"detail"}``, as SageMaker sends "SageMaker Training Job State Change" events. The ``id`` is a
UUID and the idempotency key: a receiver that sees an id twice (a retry) has seen that event.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

DETAIL_TYPE = "SageMaker Training Job State Change"
SOURCE = "aws.sagemaker"
VERSION = "0"


def iso_time(ts: float) -> str:
    """``ts`` (epoch seconds) as EventBridge writes ``time``: ISO-8601 UTC to the second, "Z"."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    """An envelope's ``time`` back as an aware datetime (for PutEvents' ``Time``)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def envelope(detail: dict[str, Any], *, account: str, region: str, resources: list[str],
             time: float, detail_type: str = DETAIL_TYPE, source: str = SOURCE,
             event_id: str | None = None) -> dict[str, Any]:
    """A complete envelope around ``detail`` (a fresh UUID unless ``event_id`` is given)."""
    return {
        "version": VERSION,
        "id": event_id or str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": source,
        "account": account,
        "time": iso_time(time),
        "region": region,
        "resources": list(resources),
        "detail": detail,
    }


def event_id(event: dict[str, Any]) -> str:
    return str(event["id"])


def job_name(event: dict[str, Any]) -> str | None:
    """The training job an event is about, if it says."""
    detail = event.get("detail")
    name = detail.get("TrainingJobName") if isinstance(detail, dict) else None
    return name if isinstance(name, str) else None
