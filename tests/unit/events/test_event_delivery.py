"""Webhook delivery through the EventBus against real HTTP receivers on 127.0.0.1: order,
signatures, retries, dead letters and redrive, isolation from a hanging receiver, restart."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from eventkit import Receiver, advance, new_job, wait_until

from murphy.events.bus import EventBus
from murphy.events.dispatcher import backoff_delay
from murphy.events.webhook import sign, verify_signature
from murphy.jobs.model import SecondaryStatus
from murphy.settings import Settings
from murphy.store import JobStore, SqlJobStore

S = SecondaryStatus
MakeBus = Callable[..., EventBus]
MakeReceiver = Callable[..., Receiver]


def webhook(rx: Receiver, secret: str = "s3cret") -> dict[str, str]:
    return {"type": "webhook", "url": rx.url, "secret": secret}


def lifecycle(store: JobStore, name: str) -> None:
    new_job(store, name)
    advance(store, name, S.Training)
    advance(store, name, S.Stopping)
    advance(store, name, S.Stopped)


def test_events_arrive_in_order_signed_and_filtered(
        store: JobStore, make_bus: MakeBus, receiver_factory: MakeReceiver) -> None:
    everything, stopped = receiver_factory(), receiver_factory()
    bus = make_bus(store)
    bus.start()
    bus.create_subscription("all", {}, webhook(everything))
    bus.create_subscription("stopped", {"detail": {"TrainingJobStatus": ["Stopped"]}},
                            webhook(stopped, "other"))
    for name in ("job-a", "job-b"):
        lifecycle(store, name)
    outbox = store.events_after(0)
    assert len(outbox) == 8
    got = everything.wait_for(8)
    assert [e["id"] for e in got] == [e["id"] for _, e in outbox]
    for hit, (seq, event) in zip(everything.hits, outbox, strict=True):
        assert hit.headers["Content-Type"] == "application/json"
        assert hit.headers["X-Murphy-Event-Id"] == event["id"]
        assert hit.headers["X-Murphy-Event-Seq"] == str(seq)
        assert verify_signature("s3cret", hit.body, hit.headers["X-Murphy-Signature-256"])
        assert not verify_signature("wrong", hit.body, hit.headers["X-Murphy-Signature-256"])
    assert [(e["detail"]["TrainingJobName"], e["detail"]["SecondaryStatus"]) for e in got] == [
        (n, s) for n in ("job-a", "job-b") for s in ("Starting", "Training", "Stopping", "Stopped")]
    only = stopped.wait_for(2)
    time.sleep(0.3)
    assert [e["detail"]["TrainingJobName"] for e in stopped.events()] == ["job-a", "job-b"]
    assert all(verify_signature("other", h.body, h.headers["X-Murphy-Signature-256"]) for h in stopped.hits)
    assert {e["detail"]["TrainingJobStatus"] for e in only} == {"Stopped"}


def test_sign_is_hmac_sha256_of_the_body() -> None:
    body = b'{"a":1}'
    # RFC 4231 test case 2 pins the primitive; the header is "sha256=" + its hex digest.
    assert sign("Jefe", b"what do ya want for nothing?") == (
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    assert verify_signature("key", body, sign("key", body))
    assert not verify_signature("key", b'{"a":2}', sign("key", body))
    assert not verify_signature("other", body, sign("key", body))
    assert not verify_signature("key", body, None)


def test_a_failing_receiver_gets_retries_with_the_same_id(
        store: JobStore, make_bus: MakeBus, receiver_factory: MakeReceiver) -> None:
    rx = receiver_factory(fail_first=2)
    bus = make_bus(store)
    bus.start()
    bus.create_subscription("flaky", {}, webhook(rx))
    new_job(store, "job-a")
    [event] = rx.wait_for(1)
    assert len(rx.attempts) == 3  # two 500s, then 200 (max attempts is 3)
    assert {a.headers["X-Murphy-Event-Id"] for a in rx.attempts} == {event["id"]}
    assert bus.dead_letters() == []


def test_dead_letter_after_the_last_attempt_then_redrive(
        store: JobStore, make_bus: MakeBus, receiver_factory: MakeReceiver) -> None:
    rx = receiver_factory(mode="fail")
    bus = make_bus(store)
    bus.start()
    sub = bus.create_subscription("broken", {}, webhook(rx))
    new_job(store, "job-a")
    wait_until(lambda: len(bus.dead_letters()) == 1, 10, "a dead letter")
    [letter] = bus.dead_letters("broken")
    seq, event = store.events_after(0)[0]
    assert (letter.subscription_id, letter.seq, letter.attempts) == (sub.id, seq, 3)
    assert letter.event == event and "HTTP 500" in letter.last_error and "receiver broke" in letter.last_error
    assert len(rx.attempts) == 3
    # The cursor moved on: the next event is tried (and, the receiver being back, delivered).
    wait_until(lambda: store.get_cursor(sub.id) == seq, 5, "the cursor to pass the dead letter")
    rx.mode = "ok"
    advance(store, "job-a", S.Training)
    [later] = rx.wait_for(1)
    assert later["detail"]["SecondaryStatus"] == "Training"

    assert bus.redrive("broken") == 1
    got = rx.wait_for(2)
    assert got[1]["id"] == event["id"]  # same event, same id
    assert rx.hits[1].headers["X-Murphy-Event-Seq"] == str(seq)
    wait_until(lambda: bus.dead_letters() == [] and store.list_dead_letters(redriving=True) == [],
               5, "the redriven letter to be gone")
    assert bus.redrive("broken") == 0


def test_a_redriven_letter_that_fails_again_is_a_dead_letter_again(
        store: JobStore, make_bus: MakeBus, receiver_factory: MakeReceiver) -> None:
    rx = receiver_factory(mode="close")  # drops the connection without an answer
    bus = make_bus(store)
    bus.start()
    bus.create_subscription("gone", {}, webhook(rx))
    new_job(store, "job-a")
    wait_until(lambda: len(bus.dead_letters()) == 1, 10, "a dead letter")
    assert "connection" in bus.dead_letters()[0].last_error.lower()
    assert bus.redrive("gone", [bus.dead_letters()[0].seq]) == 1
    wait_until(lambda: len(rx.attempts) == 6, 10, "three more attempts")
    wait_until(lambda: len(bus.dead_letters()) == 1, 5, "the dead letter back")


def test_a_hanging_receiver_does_not_delay_another_subscriber(
        store: JobStore, make_bus: MakeBus, receiver_factory: MakeReceiver) -> None:
    hanging, closing, healthy = receiver_factory("hang"), receiver_factory("close"), receiver_factory()
    bus = make_bus(store, event_delivery_timeout_s=5.0)
    bus.start()
    bus.create_subscription("hangs", {}, webhook(hanging))
    bus.create_subscription("closes", {}, webhook(closing))
    bus.create_subscription("healthy", {}, webhook(healthy))
    started = time.monotonic()
    for i in range(5):
        new_job(store, f"job-{i}")
    healthy.wait_for(5)
    # Well inside one 5 s timeout of the hanging receiver: nobody waited for it.
    assert healthy.hits[-1].at - started < 3.0
    assert len(hanging.attempts) == 1


def test_a_wake_up_delivers_at_once(
        store: JobStore, make_bus: MakeBus, receiver_factory: MakeReceiver) -> None:
    rx = receiver_factory()
    bus = make_bus(store, event_poll_interval_s=30.0)  # only wake-ups can be this fast
    bus.start()
    bus.create_subscription("fast", {}, webhook(rx))
    time.sleep(0.1)  # the worker is idle, waiting
    latencies = []
    for i in range(20):
        t0 = time.monotonic()
        new_job(store, f"job-{i}")
        rx.wait_for(i + 1)
        latencies.append(rx.hits[-1].at - t0)
    # Far below the 30 s poll interval, every time (the benchmark measures the real latency).
    assert max(latencies) < 3.0, latencies
    assert sorted(latencies)[10] < 0.5, latencies


def test_a_new_bus_resumes_from_the_cursor_with_the_same_ids(
        tmp_path: Path, settings: Settings, receiver_factory: MakeReceiver) -> None:
    from murphy.jobs.events import events_for

    url = f"sqlite:///{tmp_path}/murphy.db"
    rx = receiver_factory()
    first_store = SqlJobStore(url)
    first = EventBus(first_store, settings)
    first_store.set_event_builder(events_for, on_appended=lambda _s: first.wake())
    first.start()
    first.create_subscription("durable", {}, webhook(rx))
    lifecycle(first_store, "job-a")
    rx.wait_for(4)
    first.close()
    # Written while no bus runs (as after a crash between commit and dispatch).
    first_store.set_event_builder(events_for)
    new_job(first_store, "job-b")
    advance(first_store, "job-b", S.Failed)
    first_store.close()
    time.sleep(0.3)
    assert len(rx.hits) == 4

    store = SqlJobStore(url)
    second = EventBus(store, settings)
    try:
        store.set_event_builder(events_for, on_appended=lambda _s: second.wake())
        second.start()
        got = rx.wait_for(6)
        time.sleep(0.3)
        outbox = store.events_after(0)
        assert [e["id"] for e in rx.events()] == [e["id"] for _, e in outbox]  # each exactly once
        assert [(e["detail"]["TrainingJobName"], e["detail"]["SecondaryStatus"]) for e in got[4:]] == [
            ("job-b", "Starting"), ("job-b", "Failed")]
    finally:
        second.close()
        store.close()


def test_backoff_is_exponential_with_full_jitter() -> None:
    import random

    rng = random.Random(7)
    for attempt, ceiling in [(1, 0.2), (2, 0.4), (3, 0.8), (10, 30.0), (200, 30.0)]:
        delays = [backoff_delay(attempt, 0.2, 30.0, rng) for _ in range(500)]
        assert min(delays) >= 0.0 and max(delays) <= ceiling
        assert max(delays) > 0.8 * ceiling and min(delays) < 0.2 * ceiling  # spread over the range


@pytest.mark.parametrize("mode", ["hang", "close", "fail"])
def test_closing_the_bus_is_prompt_whatever_the_receiver_does(
        mode: str, store: JobStore, make_bus: MakeBus, receiver_factory: MakeReceiver) -> None:
    rx = receiver_factory(mode)
    bus = make_bus(store, event_retry_base_s=5.0, event_retry_cap_s=5.0, event_max_attempts=8)
    bus.start()
    bus.create_subscription("slow", {}, webhook(rx))
    new_job(store, "job-a")
    wait_until(lambda: len(rx.attempts) >= 1, 5, "an attempt")
    t0 = time.monotonic()
    bus.close()
    assert time.monotonic() - t0 < 2.5
