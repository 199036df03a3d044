"""ONE contract suite for every JobStore: in-memory, SQLite (a temp file) and PostgreSQL.

SQL-only behaviour (reopening, several stores or processes on one database, error mapping) is in
test_job_store_sql.py.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.jobstore_support import S, make_record, names, pg_schema_url
from murphy.exceptions import ConcurrentUpdate, JobExists, JobNotFound
from murphy.jobs.model import (
    Handle,
    RuleEvaluationStatus,
    RuleState,
    SecondaryStatus,
    TrainingJobStatus,
)
from murphy.store import InMemoryJobStore, JobQuery, JobStore, SqlJobStore, open_job_store


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/data dir/murphy.db"  # a parent to create, with a space
    return pg_schema_url(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[JobStore]:
    s = open_job_store(store_url)
    yield s
    s.close()


# --- create / get / update ----------------------------------------------------------------------


def test_create_then_get(store: JobStore) -> None:
    rec = make_record("job-a", 1000.25)
    created = store.create(rec)
    assert created == dataclasses.replace(rec, version=1)
    assert store.get("job-a") == created


def test_duplicate_create_raises_and_keeps_the_first(store: JobStore) -> None:
    store.create(make_record("job-a", 1.0))
    with pytest.raises(JobExists):
        store.create(make_record("job-a", 2.0))
    assert store.get("job-a").creation_time == 1.0


def test_unknown_job(store: JobStore) -> None:
    with pytest.raises(JobNotFound):
        store.get("nope")
    with pytest.raises(JobNotFound):
        store.update(dataclasses.replace(make_record("nope"), version=1))


def test_update_bumps_version_and_persists(store: JobStore) -> None:
    rec = store.create(make_record("job-a"))
    rec.transition(SecondaryStatus.Training, "training", now=1005.0)
    rec.tags.append({"Key": "k", "Value": "v"})
    updated = store.update(rec)
    assert updated.version == 2
    got = store.get("job-a")
    assert got == updated
    assert got.secondary == SecondaryStatus.Training
    assert got.tags == [{"Key": "k", "Value": "v"}]
    assert store.update(got).version == 3


def test_stale_update_raises_concurrent_update(store: JobStore) -> None:
    store.create(make_record("job-a"))
    first, second = store.get("job-a"), store.get("job-a")
    first.notes["by"] = "first"
    store.update(first)
    second.notes["by"] = "second"
    with pytest.raises(ConcurrentUpdate):
        store.update(second)
    got = store.get("job-a")
    assert got.notes == {"by": "first"}
    assert got.version == 2


def test_callers_never_share_state_with_the_store(store: JobStore) -> None:
    rec = make_record("job-a")
    created = store.create(rec)
    rec.spec["TrainingJobName"] = "mutated"
    created.notes["x"] = 1
    created.transitions[0].message = "mutated"
    got = store.get("job-a")
    assert got.spec == {"TrainingJobName": "job-a"}
    assert got.notes == {}
    assert got.transitions[0].message == "Starting the training job"


def test_racing_read_modify_update_keeps_both_changes(store: JobStore) -> None:
    store.create(make_record("job-a"))
    rounds = 25
    start = threading.Barrier(2)
    errors: list[BaseException] = []
    conflicts = [0]

    def bump(key: str) -> None:
        try:
            start.wait()
            for _ in range(rounds):
                while True:
                    rec = store.get("job-a")
                    rec.notes[key] = rec.notes.get(key, 0) + 1
                    try:
                        store.update(rec)
                        break
                    except ConcurrentUpdate:
                        conflicts[0] += 1
        except BaseException as e:  # surfaced below: a thread's exception would be lost
            errors.append(e)

    threads = [threading.Thread(target=bump, args=(k,)) for k in ("api", "supervisor")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    got = store.get("job-a")
    assert got.notes == {"api": rounds, "supervisor": rounds}
    assert got.version == 1 + 2 * rounds


def test_record_with_rules_handles_and_transitions_round_trips(store: JobStore) -> None:
    rec = make_record("job-a", 1000.5, TrainingJobStatus.Stopped)
    rec.training = Handle("process", "pid-42", {"pid": 42, "workdir": "/tmp/x", "ports": [1, 2]})
    rec.rules = [
        RuleState("LossNotDecreasing", "arn:rule/1", status=RuleEvaluationStatus.IssuesFound,
                  details="loss rose", last_modified=1001.5, handle=Handle("process", "r1"),
                  result={"issues": [{"step": 3, "value": 0.5}], "nan": None}, result_uri="s3://b/r1"),
        RuleState("ProfilerReport", "arn:rule/2", kind="profiler"),
    ]
    rec.tags = [{"Key": "team", "Value": "ml"}]
    rec.notes = {"exit_code": 0, "nested": {"a": [1.5, "x"]}}
    rec.stop_reason = "rule LossNotDecreasing found an issue"
    rec.stop_sent_at = 1002.125
    rec.failure_reason = None
    store.create(rec)
    got = store.get("job-a")
    assert got == dataclasses.replace(rec, version=1)
    assert [t.status for t in got.transitions] == [S.Starting, S.Stopping, S.Stopped]
    assert got.rules[0].handle == Handle("process", "r1")


# --- query --------------------------------------------------------------------------------------


@pytest.fixture
def filled(store: JobStore) -> JobStore:
    """Seven jobs: creation times with a tie (30.0), mixed case, every status."""
    rows = [
        ("alpha-1", 10.0, TrainingJobStatus.Completed, 100.0),
        ("Alpha-2", 20.0, TrainingJobStatus.InProgress, 200.0),
        ("beta-1", 30.0, TrainingJobStatus.Failed, 300.0),
        ("beta-2", 30.0, TrainingJobStatus.Stopped, 400.0),
        ("gamma", 40.0, TrainingJobStatus.Stopping, 500.0),
        ("gamma-alpha", 50.0, TrainingJobStatus.InProgress, 600.0),
        ("zeta", 60.0, TrainingJobStatus.Completed, 700.0),
    ]
    for name, created, status, modified in rows:
        store.create(make_record(name, created, status, modified))
    return store


def test_name_contains_is_a_case_sensitive_substring(filled: JobStore) -> None:
    assert names(filled.query(JobQuery(name_contains="alpha", sort_by="Name"))) == ["alpha-1", "gamma-alpha"]
    assert names(filled.query(JobQuery(name_contains="Alpha", sort_by="Name"))) == ["Alpha-2"]
    assert names(filled.query(JobQuery(name_contains="a-", sort_by="Name"))) == ["Alpha-2", "alpha-1", "beta-1", "beta-2", "gamma-alpha"]
    assert filled.query(JobQuery(name_contains="%")) == []
    assert filled.query(JobQuery(name_contains="_")) == []


def test_status_filter(filled: JobStore) -> None:
    got = filled.query(JobQuery(status_equals=TrainingJobStatus.InProgress))
    assert names(got) == ["Alpha-2", "gamma-alpha"]
    assert names(filled.query(JobQuery(status_equals=TrainingJobStatus.Stopping))) == ["gamma"]


def test_time_filters_are_strict(filled: JobStore) -> None:
    q = JobQuery(creation_time_after=30.0)
    assert names(filled.query(q)) == ["gamma", "gamma-alpha", "zeta"]
    assert names(filled.query(JobQuery(creation_time_before=30.0))) == ["alpha-1", "Alpha-2"]
    both = JobQuery(creation_time_after=10.0, creation_time_before=40.0)
    assert names(filled.query(both)) == ["Alpha-2", "beta-1", "beta-2"]
    assert names(filled.query(JobQuery(last_modified_time_after=600.0))) == ["zeta"]
    assert names(filled.query(JobQuery(last_modified_time_before=200.0))) == ["alpha-1"]
    mixed = JobQuery(last_modified_time_after=100.0, last_modified_time_before=500.0,
                     status_equals=TrainingJobStatus.Failed)
    assert names(filled.query(mixed)) == ["beta-1"]


def test_sorts(filled: JobStore) -> None:
    # Byte order: upper case first, "-" before letters.
    by_name = ["Alpha-2", "alpha-1", "beta-1", "beta-2", "gamma", "gamma-alpha", "zeta"]
    assert names(filled.query(JobQuery(sort_by="Name"))) == by_name
    assert names(filled.query(JobQuery(sort_by="Name", sort_order="Descending"))) == by_name[::-1]
    by_time = ["alpha-1", "Alpha-2", "beta-1", "beta-2", "gamma", "gamma-alpha", "zeta"]
    assert names(filled.query(JobQuery())) == by_time
    assert names(filled.query(JobQuery(sort_order="Descending"))) == by_time[::-1]
    by_status = ["alpha-1", "zeta", "beta-1", "Alpha-2", "gamma-alpha", "beta-2", "gamma"]
    assert names(filled.query(JobQuery(sort_by="Status"))) == by_status
    assert names(filled.query(JobQuery(sort_by="Status", sort_order="Descending"))) == by_status[::-1]


@pytest.mark.parametrize("sort_by", ["Name", "CreationTime", "Status"])
@pytest.mark.parametrize("order", ["Ascending", "Descending"])
def test_paging_covers_every_record_once(filled: JobStore, sort_by: str, order: str) -> None:
    full = names(filled.query(JobQuery(sort_by=sort_by, sort_order=order)))
    assert len(full) == 7
    for limit in (1, 2, 3, 7, 10):
        pages: list[str] = []
        offset = 0
        while True:
            q = JobQuery(sort_by=sort_by, sort_order=order, offset=offset, limit=limit)
            page = names(filled.query(q))
            pages += page
            offset += limit
            if len(page) < limit:
                break
        assert pages == full, limit
    assert filled.query(JobQuery(offset=7)) == []
    assert names(filled.query(JobQuery(offset=5))) == ["gamma-alpha", "zeta"]


def test_active_and_counts(filled: JobStore) -> None:
    assert names(filled.active()) == ["Alpha-2", "gamma", "gamma-alpha"]
    assert filled.counts_by_status() == {
        "InProgress": 2, "Completed": 2, "Failed": 1, "Stopping": 1, "Stopped": 1,
    }
    rec = filled.get("gamma")
    rec.transition(SecondaryStatus.Stopped, "stopped", now=2000.0)
    filled.update(rec)
    assert names(filled.active()) == ["Alpha-2", "gamma-alpha"]
    assert filled.counts_by_status()["Stopped"] == 2
    assert filled.counts_by_status()["Stopping"] == 0


def test_empty_store(store: JobStore) -> None:
    assert store.query(JobQuery()) == []
    assert store.active() == []
    assert store.counts_by_status() == {s.value: 0 for s in TrainingJobStatus}


def test_open_job_store_picks_the_backend(tmp_path: Path) -> None:
    assert isinstance(open_job_store("memory://"), InMemoryJobStore)
    sql = open_job_store(f"sqlite:///{tmp_path}/x.db")
    try:
        assert isinstance(sql, SqlJobStore)
        assert (tmp_path / "x.db").exists()
    finally:
        sql.close()
    # Two memory stores are independent.
    one, two = open_job_store("memory://"), open_job_store("memory://")
    one.create(make_record("job-a"))
    with pytest.raises(JobNotFound):
        two.get("job-a")


def test_many_threads_write_and_read_at_once(store: JobStore) -> None:
    writers, jobs_each, readers = 6, 4, 3
    errors: list[BaseException] = []
    done = threading.Event()

    def write(w: int) -> None:
        try:
            for j in range(jobs_each):
                store.create(make_record(f"w{w}-j{j}", created=float(w * 100 + j)))
            for j in range(jobs_each):
                while True:
                    rec = store.get(f"w{w}-j{j}")
                    rec.transition(SecondaryStatus.Training, "training", now=rec.creation_time + 1)
                    try:
                        store.update(rec)
                        break
                    except ConcurrentUpdate:
                        continue
        except BaseException as e:
            errors.append(e)

    def read() -> None:
        try:
            while not done.is_set():
                store.query(JobQuery(sort_by="Name", limit=5))
                store.counts_by_status()
                store.active()
        except BaseException as e:
            errors.append(e)

    reading = [threading.Thread(target=read) for _ in range(readers)]
    writing = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in reading + writing:
        t.start()
    for t in writing:
        t.join(timeout=120)
    done.set()
    for t in reading:
        t.join(timeout=60)
    assert not errors, errors
    everything = store.query(JobQuery())
    assert len(everything) == writers * jobs_each
    assert all(r.secondary == SecondaryStatus.Training and r.version == 2 for r in everything)
