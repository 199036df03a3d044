"""EventBridge target: ``PutEvents`` of each event to a bus (AWS, or any endpoint that speaks
AWS JSON 1.1 ``AWSEvents.PutEvents``, such as moto's server).

The envelope's fields map onto the entry (``Source``, ``DetailType``, ``Detail`` as a JSON
string, ``Resources``, ``Time``); the receiving bus assigns its own event id. PutEvents reports
per-entry failures inside a 200 response: those count as failed attempts too. botocore's own
retries are off, so the dispatcher's backoff and dead-letter rules are the only ones.

Credentials come from boto3's usual chain (environment, profile, instance role). Note that AWS
reserves ``aws.*`` sources for its own services, so a real AWS bus is expected to reject
``aws.sagemaker``; a self-hosted or emulated bus accepts it.
"""

from __future__ import annotations

import json
from typing import Any

from murphy.events.envelope import parse_time
from murphy.exceptions import DeliveryError


class EventBridgeTarget:
    def __init__(self, target: dict[str, Any], timeout: float) -> None:
        import boto3  # the service extra has it; imported here so murphy.events stays light
        from botocore.config import Config

        self._bus = str(target.get("event_bus_name") or "default")
        self._client: Any = boto3.client(
            "events",
            endpoint_url=target.get("endpoint_url") or None,
            region_name=target.get("region") or None,
            config=Config(connect_timeout=timeout, read_timeout=timeout,
                          retries={"max_attempts": 1, "mode": "standard"}),
        )

    def deliver(self, seq: int, event: dict[str, Any]) -> None:
        del seq  # EventBridge has no field for it; the receiving bus orders by arrival
        entry: dict[str, Any] = {
            "Source": event["source"],
            "DetailType": event["detail-type"],
            "Detail": json.dumps(event["detail"], separators=(",", ":")),
            "Resources": list(event.get("resources") or []),
            "EventBusName": self._bus,
        }
        if event.get("time"):
            entry["Time"] = parse_time(str(event["time"]))
        try:
            response = self._client.put_events(Entries=[entry])
        except Exception as e:  # botocore raises many unrelated types; each is one failed attempt
            raise DeliveryError(f"PutEvents failed: {type(e).__name__}: {e}") from e
        if response.get("FailedEntryCount"):
            failed = (response.get("Entries") or [{}])[0]
            raise DeliveryError(
                f"PutEvents rejected the event: {failed.get('ErrorCode')}: {failed.get('ErrorMessage')}")

    def close(self) -> None:
        self._client.close()
