"""The job store's event side on every backend (memory, SQLite, PostgreSQL): the outbox written
in the record's transaction, subscriptions with cursors, dead letters."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contract.jobstore_support import make_record, pg_schema_url
from murphy.exceptions import ConcurrentUpdate, SubscriptionExists, SubscriptionNotFound
from murphy.jobs.model import JobRecord, SecondaryStatus
from murphy.store import JobStore, SqlJobStore, open_job_store
from murphy.store.base import DeadLetter, Subscription


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/murphy.db"
    return pg_schema_url(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[JobStore]:
    s = open_job_store(store_url)
    yield s
    s.close()


class Recorder:
    """A builder that emits one event per write that changed the secondary status, and
    remembers what it was called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[JobRecord | None, JobRecord]] = []
        self.fail = False

    def __call__(self, old: JobRecord | None, new: JobRecord) -> list[dict[str, Any]]:
        self.calls.append((old, new))
        if self.fail:
            raise RuntimeError("builder bug")
        if old is not None and old.secondary == new.secondary:
            return []
        return [{"id": str(uuid.uuid4()), "job": new.name, "to": new.secondary.value}]


def _sub(name: str, created: float = 1.0) -> Subscription:
    return Subscription(f"sub-{name}", name, {"source": ["aws.sagemaker"]},
                        {"type": "webhook", "url": "http://127.0.0.1:9/x", "secret": "s"}, created)


# --- the outbox -----------------------------------------------------------------------------


def test_no_builder_no_events(store: JobStore) -> None:
    rec = store.create(make_record("job-a"))
    rec.transition(SecondaryStatus.Training, "t", now=1001.0)
    store.update(rec)
    assert store.last_event_seq() == 0
    assert store.events_after(0) == []


def test_events_are_written_with_the_change_and_read_in_order(store: JobStore) -> None:
    builder = Recorder()
    appended: list[tuple[int, list[tuple[int, dict[str, Any]]]]] = []
    # The listener runs after the commit: what it was told about is already readable.
    store.set_event_builder(builder, lambda seq: appended.append((seq, store.events_after(seq - 1))))
    rec = store.create(make_record("job-a"))
    rec.transition(SecondaryStatus.Training, "t", now=1001.0)
    rec = store.update(rec)
    rec.tags.append({"Key": "k", "Value": "v"})  # no status change: no event
    rec = store.update(rec)
    rec.transition(SecondaryStatus.Uploading, "u", now=1002.0)
    store.update(rec)

    rows = store.events_after(0)
    assert [seq for seq, _ in rows] == sorted(seq for seq, _ in rows)
    assert [e["to"] for _, e in rows] == ["Starting", "Training", "Uploading"]
    assert store.last_event_seq() == rows[-1][0]
    assert [seq for seq, _ in appended] == [seq for seq, _ in rows]
    assert all(seen and seen[0][0] == seq for seq, seen in appended)
    assert store.events_after(rows[0][0]) == rows[1:]
    assert store.events_after(0, limit=2) == rows[:2]
    assert store.events_after(rows[-1][0]) == []


def test_the_builder_sees_the_stored_row_as_old(store: JobStore) -> None:
    builder = Recorder()
    store.set_event_builder(builder)
    created = store.create(make_record("job-a"))
    assert builder.calls[0][0] is None
    assert builder.calls[0][1] == created
    created.transition(SecondaryStatus.Training, "t", now=1001.0)
    updated = store.update(created)
    old, new = builder.calls[1]
    assert old is not None and old.version == 1 and old.secondary == SecondaryStatus.Starting
    assert new == updated


def test_a_failing_builder_rolls_the_change_back(store: JobStore) -> None:
    builder = Recorder()
    store.set_event_builder(builder)
    rec = store.create(make_record("job-a"))
    builder.fail = True
    rec.transition(SecondaryStatus.Training, "t", now=1001.0)
    with pytest.raises(RuntimeError, match="builder bug"):
        store.update(rec)
    with pytest.raises(RuntimeError, match="builder bug"):
        store.create(make_record("job-b"))
    assert store.get("job-a").secondary == SecondaryStatus.Starting
    assert store.get("job-a").version == 1
    assert [e["job"] for _, e in store.events_after(0)] == ["job-a"]
    assert [r.name for r in store.active()] == ["job-a"]


def test_a_stale_update_writes_no_event(store: JobStore) -> None:
    store.set_event_builder(Recorder())
    rec = store.create(make_record("job-a"))
    stale = store.get("job-a")
    rec.transition(SecondaryStatus.Training, "t", now=1001.0)
    store.update(rec)
    stale.transition(SecondaryStatus.Failed, "f", now=1001.0)
    with pytest.raises(ConcurrentUpdate):
        store.update(stale)
    assert [e["to"] for _, e in store.events_after(0)] == ["Starting", "Training"]


def test_a_tailing_reader_never_misses_an_event_of_concurrent_writers(store: JobStore) -> None:
    """Seqs become visible in commit order: a reader that moves its cursor to the last seq it
    saw never skips a row committed later with a smaller seq."""
    store.set_event_builder(Recorder())
    writers, per_writer = 4, 10
    for w in range(writers):
        store.create(make_record(f"job-{w}"))
    seen: list[int] = []
    done = threading.Event()

    def read() -> None:
        cursor = 0
        while True:
            finished = done.is_set()
            for seq, _ in store.events_after(cursor, limit=7):
                seen.append(seq)
                cursor = seq
            if finished and store.events_after(cursor) == []:
                return

    def write(w: int) -> None:
        path = [SecondaryStatus.Downloading, SecondaryStatus.Training, SecondaryStatus.Uploading]
        for i in range(per_writer):
            rec = store.get(f"job-{w}")
            if i < len(path):
                rec.transition(path[i], "x", now=1000.0 + i)
            else:
                rec.notes["i"] = i  # alternates with status-free writes
            store.update(rec)
            rec = store.get(f"job-{w}")
            rec.failure_reason = f"r{i}" if i >= len(path) else None
            store.update(rec)

    reader = threading.Thread(target=read)
    reader.start()
    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    reader.join(30)
    assert not reader.is_alive()
    everything = [seq for seq, _ in store.events_after(0, limit=1000)]
    assert len(everything) == writers * 4  # Starting + 3 stages each
    assert seen == everything


# --- subscriptions and cursors ----------------------------------------------------------------


def test_subscription_crud(store: JobStore) -> None:
    a, b = _sub("alpha", 1.0), _sub("beta", 2.0)
    store.create_subscription(a)
    store.create_subscription(b, cursor=0)
    assert store.list_subscriptions() == [a, b]
    assert store.get_subscription("sub-alpha") == a
    assert store.get_subscription("beta") == b
    with pytest.raises(SubscriptionExists):
        store.create_subscription(Subscription("sub-other", "alpha", {}, {}, 3.0))
    store.delete_subscription(a.id)
    assert store.list_subscriptions() == [b]
    with pytest.raises(SubscriptionNotFound):
        store.get_subscription("alpha")
    with pytest.raises(SubscriptionNotFound):
        store.delete_subscription(a.id)


def test_a_subscription_target_can_be_replaced(store: JobStore) -> None:
    store.create_subscription(_sub("alpha"))
    store.create_subscription(_sub("beta"))
    sealed = {"type": "webhook", "url": "http://127.0.0.1:9/x", "secret": "fernet:v1:abc"}
    store.set_subscription_target("sub-alpha", sealed)
    assert store.get_subscription("alpha").target == sealed
    assert store.get_subscription("beta").target["secret"] == "s"
    assert [s.name for s in store.list_subscriptions()] == ["alpha", "beta"]
    with pytest.raises(SubscriptionNotFound):
        store.set_subscription_target("sub-nope", sealed)


def test_cursor_starts_at_the_end_of_the_outbox_unless_given(store: JobStore) -> None:
    store.set_event_builder(Recorder())
    store.create(make_record("job-a"))
    store.create(make_record("job-b"))
    end = store.last_event_seq()
    store.create_subscription(_sub("late"))
    store.create_subscription(_sub("replay"), cursor=0)
    assert store.get_cursor("sub-late") == end
    assert store.get_cursor("sub-replay") == 0
    store.set_cursor("sub-replay", 1)
    store.set_cursor("sub-replay", 0)  # never backwards
    assert store.get_cursor("sub-replay") == 1
    with pytest.raises(SubscriptionNotFound):
        store.get_cursor("sub-nope")
    with pytest.raises(SubscriptionNotFound):
        store.set_cursor("sub-nope", 5)


# --- dead letters ---------------------------------------------------------------------------


def test_dead_letters_add_list_redrive_remove(store: JobStore) -> None:
    store.create_subscription(_sub("alpha"))
    store.create_subscription(_sub("beta"))
    ev = {"id": "e-1", "detail": {"x": [1, 2]}}
    store.add_dead_letter(DeadLetter("sub-alpha", 3, ev, 8, "HTTP 500", 10.0))
    store.add_dead_letter(DeadLetter("sub-alpha", 1, ev, 8, "timeout", 11.0))
    store.add_dead_letter(DeadLetter("sub-beta", 2, ev, 8, "refused", 12.0))
    # Idempotent on (subscription, seq): the newer failure replaces the older.
    store.add_dead_letter(DeadLetter("sub-alpha", 3, ev, 2, "HTTP 503", 13.0))
    alpha = store.list_dead_letters("sub-alpha")
    assert [(d.seq, d.attempts, d.last_error) for d in alpha] == [(1, 8, "timeout"), (3, 2, "HTTP 503")]
    assert alpha[0].event == ev and alpha[0].failed_at == 11.0
    assert [(d.subscription_id, d.seq) for d in store.list_dead_letters()] == [
        ("sub-alpha", 1), ("sub-alpha", 3), ("sub-beta", 2)]

    assert store.redrive_dead_letters("sub-alpha", [3, 99]) == 1
    assert [d.seq for d in store.list_dead_letters("sub-alpha")] == [1]
    assert [d.seq for d in store.list_dead_letters("sub-alpha", redriving=True)] == [3]
    assert store.redrive_dead_letters("sub-alpha") == 1  # the rest; 3 is already queued
    store.remove_dead_letter("sub-alpha", 3)
    store.remove_dead_letter("sub-alpha", 3)  # missing is fine
    assert [d.seq for d in store.list_dead_letters("sub-alpha", redriving=True)] == [1]
    # Failing again makes it a dead letter once more.
    store.add_dead_letter(DeadLetter("sub-alpha", 1, ev, 8, "still down", 14.0))
    assert [d.last_error for d in store.list_dead_letters("sub-alpha")] == ["still down"]
    assert store.list_dead_letters("sub-alpha", redriving=True) == []

    store.delete_subscription("sub-alpha")
    assert [d.subscription_id for d in store.list_dead_letters()] == ["sub-beta"]


# --- retention ----------------------------------------------------------------------------------


def _events(store: JobStore, name: str, count: int) -> None:
    rec = store.create(make_record(name))
    statuses = [SecondaryStatus.Training, SecondaryStatus.Uploading, SecondaryStatus.Completed]
    for i in range(count - 1):
        rec.transition(statuses[i % len(statuses)], "t", now=1001.0 + i)
        rec = store.update(rec)


def test_pruning_removes_old_events_from_the_front_and_keeps_the_newest(store: JobStore) -> None:
    store.set_event_builder(Recorder())
    assert store.prune_events(time.time() + 60) == (0, 0)  # empty outbox
    _events(store, "job-a", 3)
    cutoff = time.time()
    time.sleep(0.02)  # created_at is wall-clock time at commit
    _events(store, "job-b", 2)
    rows = store.events_after(0)
    assert len(rows) == 5
    assert store.prune_events(0.0) == (0, 0)  # nothing that old

    assert store.prune_events(cutoff + 0.01) == (3, rows[2][0])
    assert store.events_after(0) == rows[3:]
    assert store.events_after(rows[1][0]) == rows[3:]  # a cursor inside the pruned range
    assert store.events_after(rows[3][0]) == rows[4:]
    assert store.events_after(0, limit=1) == rows[3:4]
    # Everything is old now, but the newest row stays: seqs never go back.
    assert store.prune_events(time.time() + 60) == (1, rows[3][0])
    assert store.events_after(0) == rows[4:]
    assert store.last_event_seq() == rows[4][0]
    assert store.prune_events(time.time() + 60) == (0, 0)
    _events(store, "job-c", 1)
    assert store.events_after(rows[4][0])[0][0] > rows[4][0]
    store.create_subscription(_sub("late"))
    assert store.get_cursor("sub-late") == store.last_event_seq()


def test_pruning_dead_letters_keeps_recent_and_queued_ones(store: JobStore) -> None:
    store.create_subscription(_sub("alpha"))
    ev = {"id": "e-1"}
    for seq, failed_at in ((1, 10.0), (2, 20.0), (3, 30.0), (4, 40.0)):
        store.add_dead_letter(DeadLetter("sub-alpha", seq, ev, 8, "down", failed_at))
    assert store.redrive_dead_letters("sub-alpha", [2]) == 1
    assert store.prune_dead_letters(5.0) == 0
    assert store.prune_dead_letters(35.0) == 2  # 1 and 3; 2 is queued for redelivery
    assert [d.seq for d in store.list_dead_letters("sub-alpha")] == [4]
    assert [d.seq for d in store.list_dead_letters("sub-alpha", redriving=True)] == [2]


# --- SQL: everything survives a restart -------------------------------------------------------


def test_events_subscriptions_and_letters_survive_reopening(store_url: str) -> None:
    if store_url == "memory://":
        pytest.skip("the in-memory store lives as long as its process")
    first = SqlJobStore(store_url)
    first.set_event_builder(Recorder())
    first.create(make_record("job-a"))
    first.create_subscription(_sub("alpha"), cursor=0)
    first.set_cursor("sub-alpha", 1)
    first.add_dead_letter(DeadLetter("sub-alpha", 1, {"id": "x"}, 3, "e", 5.0))
    rows = first.events_after(0)
    first.close()
    again = SqlJobStore(store_url)
    try:
        assert again.events_after(0) == rows
        assert again.get_cursor("sub-alpha") == 1
        assert [d.seq for d in again.list_dead_letters()] == [1]
        again.set_event_builder(Recorder())
        again.create(make_record("job-b"))
        assert again.last_event_seq() > rows[-1][0]
    finally:
        again.close()
