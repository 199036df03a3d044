"""The EventBridge target against moto's server: PutEvents, routed by a rule to an SQS queue."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from eventkit import advance, new_job, wait_until

from murphy.events.bus import EventBus
from murphy.events.eventbridge import EventBridgeTarget
from murphy.exceptions import DeliveryError
from murphy.jobs.model import SecondaryStatus
from murphy.store import JobStore

pytestmark = pytest.mark.s3  # needs moto's server (started by the session fixture)


@pytest.fixture
def aws(moto_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in moto_server.env().items():
        monkeypatch.setenv(key, value)
    return moto_server


def _client(aws: Any, service: str) -> Any:
    import boto3

    return boto3.client(service, endpoint_url=aws.endpoint_url, region_name=aws.region,
                        aws_access_key_id=aws.access_key, aws_secret_access_key=aws.secret_key)


def _receive(sqs: Any, queue_url: str, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(bodies) < count and time.monotonic() < deadline:
        reply = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for msg in reply.get("Messages", []):
            bodies.append(json.loads(msg["Body"]))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"])
    return bodies


def test_events_reach_an_sqs_queue_through_an_eventbridge_rule(
        aws: Any, store: JobStore, make_bus: Callable[..., EventBus]) -> None:
    events, sqs = _client(aws, "events"), _client(aws, "sqs")
    bus_name = f"murphy-{uuid.uuid4().hex[:8]}"
    events.create_event_bus(Name=bus_name)
    queue_url = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    # Only the terminal status is routed: the rule's own pattern filters on the detail.
    events.put_rule(Name="murphy-stopped", EventBusName=bus_name, EventPattern=json.dumps(
        {"source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"],
         "detail": {"TrainingJobStatus": ["Stopped"]}}))
    events.put_targets(Rule="murphy-stopped", EventBusName=bus_name,
                       Targets=[{"Id": "queue", "Arn": queue_arn}])

    bus = make_bus(store)
    bus.start()
    bus.create_subscription("to-eventbridge", {}, {
        "type": "eventbridge", "endpoint_url": aws.endpoint_url, "region": aws.region,
        "event_bus_name": bus_name})
    new_job(store, "job-a")
    advance(store, "job-a", SecondaryStatus.Stopping)
    advance(store, "job-a", SecondaryStatus.Stopped)
    [message] = _receive(sqs, queue_url, 1)
    [(_, sent)] = [(s, e) for s, e in store.events_after(0) if e["detail"]["TrainingJobStatus"] == "Stopped"]
    assert message["source"] == "aws.sagemaker"
    assert message["detail-type"] == "SageMaker Training Job State Change"
    assert message["resources"] == sent["resources"]
    assert message["detail"] == sent["detail"]
    assert message["detail"]["MurphyChanges"][-1]["To"] == "Stopped"
    assert _receive(sqs, queue_url, 1, timeout=1.5) == []  # the other two were not routed
    wait_until(lambda: store.get_cursor(bus.get_subscription("to-eventbridge").id) == 3, 5, "the cursor")
    assert bus.dead_letters() == []


def test_put_events_failures_are_failed_attempts(aws: Any) -> None:
    event = {"source": "aws.sagemaker", "detail-type": "x", "detail": {}, "resources": [],
             "time": "2024-01-01T00:00:00Z"}
    unknown_bus = EventBridgeTarget({"endpoint_url": aws.endpoint_url, "region": aws.region,
                                     "event_bus_name": "no-such-bus"}, timeout=5.0)
    default_bus = EventBridgeTarget({"endpoint_url": aws.endpoint_url, "region": aws.region},
                                    timeout=5.0)
    try:
        with pytest.raises(DeliveryError, match="PutEvents failed: ResourceNotFoundException"):
            unknown_bus.deliver(1, event)
        default_bus.deliver(1, event)
        # A per-entry failure comes inside a 200 response: still a failure.
        with pytest.raises(DeliveryError, match="rejected the event: InvalidArgument"):
            default_bus.deliver(2, {**event, "detail-type": ""})
    finally:
        unknown_bus.close()
        default_bus.close()
