"""The bus's housekeeping: subscriptions created or deleted by another process on the same
database, and the outbox / dead-letter retention."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from eventkit import Receiver, advance, new_job, wait_until

from murphy.events.bus import EventBus
from murphy.jobs.events import events_for
from murphy.jobs.model import SecondaryStatus
from murphy.store import JobStore, open_job_store
from murphy.store.base import DeadLetter

S = SecondaryStatus
MakeBus = Callable[..., EventBus]


@pytest.fixture
def shared_db(tmp_path: Path) -> Iterator[tuple[JobStore, JobStore]]:
    """Two stores on one SQLite file: this process's and "another process's"."""
    url = f"sqlite:///{tmp_path}/murphy.db"
    mine, theirs = open_job_store(url), open_job_store(url)
    theirs.set_event_builder(events_for)  # its writes append events too (no wake-up here)
    yield mine, theirs
    theirs.close()
    mine.close()


def test_a_subscription_created_elsewhere_is_delivered_and_one_deleted_elsewhere_stops(
        shared_db: tuple[JobStore, JobStore], make_bus: MakeBus,
        receiver_factory: Callable[..., Receiver]) -> None:
    mine, theirs = shared_db
    rx = receiver_factory()
    bus = make_bus(mine, event_subscription_sync_s=0.1)
    bus.start()
    other = EventBus(theirs, bus.settings)  # never started: it only writes rows, like a CLI
    sub = other.create_subscription("elsewhere", {}, {"type": "webhook", "url": rx.url})
    wait_until(lambda: sub.id in bus._workers, 5, "the running bus to start a worker")
    new_job(theirs, "job-a")
    assert [e["detail"]["TrainingJobName"] for e in rx.wait_for(1)] == ["job-a"]

    other.delete_subscription("elsewhere")
    wait_until(lambda: sub.id not in bus._workers, 5, "the running bus to stop the worker")
    advance(theirs, "job-a", S.Training)
    time.sleep(0.6)  # several of the bus's outbox polls
    assert len(rx.attempts) == 1


def test_retention_deletes_old_events_and_letters_and_names_subscriptions_left_behind(
        store: JobStore, make_bus: MakeBus, caplog: pytest.LogCaptureFixture) -> None:
    bus = make_bus(store, event_retention_s=3600.0, dead_letter_retention_s=7200.0)
    behind = bus.create_subscription("behind", {}, {"type": "webhook", "url": "http://127.0.0.1:9/x"},
                                     start_seq=0)
    new_job(store, "job-a")
    advance(store, "job-a", S.Training)
    advance(store, "job-a", S.Uploading)
    up_to_date = bus.create_subscription("current", {}, {"type": "webhook", "url": "http://127.0.0.1:9/y"})
    rows = store.events_after(0)
    store.add_dead_letter(DeadLetter(behind.id, rows[0][0], rows[0][1], 8, "down", time.time()))
    assert bus.prune() == (0, 0)  # nothing is an hour old yet

    with caplog.at_level(logging.WARNING, logger="murphy.events.bus"):
        assert bus.prune(now=time.time() + 3601) == (2, 0)  # the newest event stays
    assert store.events_after(0) == rows[2:]
    assert "before subscription(s) behind delivered them" in caplog.text
    assert "current" not in caplog.text
    assert store.get_cursor(up_to_date.id) == rows[2][0]
    assert len(store.list_dead_letters()) == 1
    assert bus.prune(now=time.time() + 7201) == (0, 1)
    assert store.list_dead_letters() == []


def test_zero_retention_keeps_everything(store: JobStore, make_bus: MakeBus) -> None:
    bus = make_bus(store, event_retention_s=0.0, dead_letter_retention_s=0.0)
    new_job(store, "job-a")
    advance(store, "job-a", S.Training)
    store.add_dead_letter(DeadLetter("sub-x", 1, {"id": "e"}, 8, "down", 0.0))
    assert bus.prune(now=time.time() + 10 * 365 * 86400) == (0, 0)
    assert len(store.events_after(0)) == 2 and len(store.list_dead_letters()) == 1


def test_the_running_bus_applies_retention_by_itself(store: JobStore, make_bus: MakeBus) -> None:
    bus = make_bus(store, event_subscription_sync_s=0.05, event_prune_interval_s=0.05,
                   event_retention_s=0.2)
    new_job(store, "job-a")
    advance(store, "job-a", S.Training)
    advance(store, "job-a", S.Uploading)
    newest = store.last_event_seq()
    bus.start()
    wait_until(lambda: [s for s, _ in store.events_after(0)] == [newest], 5, "old events to be pruned")
    assert store.last_event_seq() == newest
