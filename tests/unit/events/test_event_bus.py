"""The EventBus facade: subscription validation, in-process callbacks, reading and waiting on
the outbox, and the control plane's wiring (every store write wakes the bus)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from eventkit import Receiver, advance, new_job, wait_until

from murphy.events.bus import EventBus
from murphy.events.sealing import unseal
from murphy.exceptions import ValidationException
from murphy.jobs.model import SecondaryStatus
from murphy.settings import Settings
from murphy.store import JobStore

S = SecondaryStatus
MakeBus = Callable[..., EventBus]
HOOK = {"type": "webhook", "url": "http://127.0.0.1:9/hook", "secret": "s"}


@pytest.mark.parametrize(("name", "pattern", "target", "message"), [
    ("bad name!", {}, HOOK, "Subscription name must be"),
    ("", {}, HOOK, "Subscription name must be"),
    ("p", {"source": "aws.sagemaker"}, HOOK, 'field "source": must be an array'),
    ("p", [], HOOK, "must be a JSON object"),
    ("t", {}, {"type": "webhook", "url": "not a url"}, "must be an http:// or https:// URL"),
    ("t", {}, {"type": "webhook", "url": "ftp://example.com/x"}, "must be an http:// or https:// URL"),
    ("t", {}, {"type": "webhook", "url": "http:///path"}, "no host"),
    ("t", {}, {"type": "webhook", "url": "http://h:99999/"}, "not a valid URL"),
    ("t", {}, {"type": "webhook"}, "target.url is required"),
    ("t", {}, {"type": "webhook", "url": "http://h/", "secret": ""}, "target.secret"),
    ("t", {}, {"type": "webhook", "url": "http://h/", "extra": 1}, "Unknown target field(s) extra"),
    ("t", {}, {"type": "sqs"}, "Unknown target type 'sqs'"),
    ("t", {}, "http://h/", "target must be an object"),
    ("t", {}, {"type": "eventbridge", "endpoint_url": "nope"}, "target.endpoint_url must be"),
    ("t", {}, {"type": "eventbridge", "region": "US East"}, "not a region name"),
])
def test_bad_subscriptions_are_refused_with_a_clear_message(
        store: JobStore, make_bus: MakeBus, name: str, pattern: Any, target: Any, message: str) -> None:
    bus = make_bus(store)
    with pytest.raises(ValidationException) as caught:
        bus.create_subscription(name, pattern, target)
    assert message in caught.value.message
    assert bus.list_subscriptions() == []


def test_subscription_lifecycle(store: JobStore, make_bus: MakeBus) -> None:
    bus = make_bus(store)
    new_job(store, "job-a")
    hook = bus.create_subscription("hook", {"source": ["aws.sagemaker"]},
                                   {"type": "webhook", "url": "https://example.com/x"})
    assert hook.id.startswith("sub-") and hook.name == "hook"
    assert len(hook.target["secret"]) >= 32  # generated when not given
    eb = bus.create_subscription("bridge", {}, {"type": "eventbridge"}, start_seq=0)
    assert eb.target == {"type": "eventbridge", "endpoint_url": None, "region": "us-east-1",
                         "event_bus_name": "default"}
    assert store.get_cursor(hook.id) == store.last_event_seq() == 1  # from now on
    assert store.get_cursor(eb.id) == 0  # replays everything
    with pytest.raises(ValidationException, match="named hook already exists"):
        bus.create_subscription("hook", {}, HOOK)
    assert [s.name for s in bus.list_subscriptions()] == ["hook", "bridge"]
    stored = bus.get_subscription("hook")
    assert stored == bus.get_subscription(hook.id)
    # What the store keeps is the same subscription with its secret sealed (docs/events.md).
    assert stored.target["secret"].startswith("fernet:v1:") and hook.target["secret"] not in stored.target["secret"]
    assert unseal(stored.target["secret"], bus.settings) == hook.target["secret"]
    assert dataclasses.replace(stored, target={**stored.target, "secret": hook.target["secret"]}) == hook
    bus.delete_subscription("hook")
    with pytest.raises(ValidationException, match="does not exist"):
        bus.get_subscription("hook")
    with pytest.raises(ValidationException, match="does not exist"):
        bus.delete_subscription(hook.id)
    with pytest.raises(ValidationException, match="does not exist"):
        bus.redrive("hook")
    with pytest.raises(ValidationException, match="does not exist"):
        bus.dead_letters("hook")


def test_a_deleted_subscription_receives_nothing_more(
        store: JobStore, make_bus: MakeBus, receiver_factory: Callable[..., Receiver]) -> None:
    rx = receiver_factory()
    bus = make_bus(store)
    bus.start()
    bus.create_subscription("gone", {}, {"type": "webhook", "url": rx.url})
    new_job(store, "job-a")
    rx.wait_for(1)
    bus.delete_subscription("gone")
    advance(store, "job-a", S.Training)
    time.sleep(0.5)
    assert len(rx.attempts) == 1


def test_callbacks_get_matching_events_in_order_at_least_once(store: JobStore, make_bus: MakeBus) -> None:
    bus = make_bus(store)
    new_job(store, "before")  # registered later: not delivered
    everything: list[dict[str, Any]] = []
    failures: list[str] = []
    stopped: list[str] = []

    def flaky(event: dict[str, Any]) -> None:
        if event["id"] not in failures:
            failures.append(event["id"])
            raise RuntimeError("try again")
        stopped.append(event["detail"]["TrainingJobName"])

    unsubscribe = bus.on(None, everything.append)
    bus.on({"detail": {"TrainingJobStatus": ["Stopped"]}}, flaky)
    bus.start()
    for name in ("job-a", "job-b"):
        new_job(store, name)
        advance(store, name, S.Stopping)
        advance(store, name, S.Stopped)
    wait_until(lambda: len(everything) == 6 and len(stopped) == 2, 10, "callbacks")
    assert [(e["detail"]["TrainingJobName"], e["detail"]["SecondaryStatus"]) for e in everything] == [
        (n, s) for n in ("job-a", "job-b") for s in ("Starting", "Stopping", "Stopped")]
    assert stopped == ["job-a", "job-b"] and len(failures) == 2  # each retried once, same event
    unsubscribe()
    new_job(store, "job-c")
    time.sleep(0.4)
    assert len(everything) == 6
    with pytest.raises(ValidationException):
        bus.on({"detail": "x"}, everything.append)


def test_events_after_filters_by_pattern(store: JobStore, make_bus: MakeBus) -> None:
    bus = make_bus(store)
    for i in range(3):
        new_job(store, f"job-{i}")
        advance(store, f"job-{i}", S.Failed)
    failed = bus.events_after(0, {"detail": {"TrainingJobStatus": ["Failed"]}})
    assert [(seq, e["detail"]["TrainingJobName"]) for seq, e in failed] == [
        (2, "job-0"), (4, "job-1"), (6, "job-2")]
    assert bus.events_after(2, {"detail": {"TrainingJobStatus": ["Failed"]}}, limit=1) == [failed[1]]
    assert [seq for seq, _ in bus.events_after(3, limit=2)] == [4, 5]
    assert bus.last_event_seq() == 6
    with pytest.raises(ValidationException):
        bus.events_after(0, {"detail": {"TrainingJobStatus": []}})


def test_wait_for_events_wakes_on_a_commit(store: JobStore, make_bus: MakeBus) -> None:
    bus = make_bus(store, event_poll_interval_s=30.0)
    assert bus.wait_for_events(0, 0.05) is False
    timer = threading.Timer(0.1, lambda: new_job(store, "job-a"))
    t0 = time.monotonic()
    timer.start()
    try:
        assert bus.wait_for_events(0, 10.0) is True
    finally:
        timer.join()
    assert time.monotonic() - t0 < 2.0
    assert bus.wait_for_events(0, 0.0) is True
    assert bus.wait_for_events(1, 0.05) is False


def test_the_control_plane_emits_events_from_the_service(tmp_path: Path) -> None:
    from murphy.jobs.plane import ControlPlane
    from murphy.runtimes.fake import FakeRuntime
    from murphy.store import InMemoryJobStore

    settings = Settings(data_dir=tmp_path, runtime="fake", event_poll_interval_s=30.0)
    plane = ControlPlane.from_settings(settings, store=InMemoryJobStore(), runtime=FakeRuntime())
    got: list[dict[str, Any]] = []
    plane.bus.on(None, got.append)
    plane.bus.start()  # the supervisor stays off: only the service writes
    try:
        request = {"TrainingJobName": "job-a", "RoleArn": "arn:aws:iam::123456789012:role/r",
                   "AlgorithmSpecification": {"TrainingImage": "x", "TrainingInputMode": "File"},
                   "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
                   "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
                   "StoppingCondition": {"MaxRuntimeInSeconds": 60},
                   "Tags": [{"Key": "team", "Value": "vision"}]}
        plane.service.create_training_job(request, account="123456789012", region="us-east-1")
        plane.service.stop_training_job("job-a")
        wait_until(lambda: len(got) == 2, 5, "two events")
        assert [e["detail"]["SecondaryStatus"] for e in got] == ["Starting", "Stopping"]
        assert got[0]["detail"]["Tags"] == {"team": "vision"}
        assert got[1]["detail"]["MurphyChanges"][0] == {
            "Kind": "TrainingJobStatus", "From": "InProgress", "To": "Stopping"}
    finally:
        plane.close()


def test_importing_murphy_events_is_light() -> None:
    """The client side (``murphy.events.subscribe``) must work without the service's stack."""
    import subprocess
    import sys

    code = ("import sys, murphy.events, murphy.events.client, murphy.events.patterns, "
            "murphy.events.webhook, murphy.events.envelope\n"
            "heavy = [m for m in ('sqlalchemy', 'httpx', 'boto3', 'pydantic', 'fastapi', "
            "'murphy.store') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "assert callable(murphy.events.sign) and callable(murphy.events.subscribe)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
