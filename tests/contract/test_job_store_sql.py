"""The SQL job store beyond the shared contract: reopening, several stores and processes on one
database, and how database errors are mapped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from contract.jobstore_support import make_record, names, pg_schema_url
from murphy.exceptions import ConcurrentUpdate, StoreSchemaError, StoreUnavailable
from murphy.store import JobQuery, SqlJobStore


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/murphy.db"
    return pg_schema_url(request.getfixturevalue("postgres_url"))


# --- persistence and sharing (SQL backends) -----------------------------------------------------


def test_records_survive_reopening(sql_url: str) -> None:
    first = SqlJobStore(sql_url)
    rec = first.create(make_record("job-a", 5.0))
    rec.notes["kept"] = True
    first.update(rec)
    first.close()
    again = SqlJobStore(sql_url)  # the schema already exists: opening is idempotent
    try:
        got = again.get("job-a")
        assert got.notes == {"kept": True}
        assert got.version == 2
        assert names(again.query(JobQuery())) == ["job-a"]
    finally:
        again.close()


def test_two_stores_on_one_database_see_each_other(sql_url: str) -> None:
    a, b = SqlJobStore(sql_url), SqlJobStore(sql_url)
    try:
        a.create(make_record("job-a"))
        seen = b.get("job-a")
        assert seen.version == 1
        fresh = a.get("job-a")
        fresh.notes["by"] = "a"
        a.update(fresh)
        with pytest.raises(ConcurrentUpdate):
            b.update(seen)
        assert b.get("job-a").notes == {"by": "a"}
        assert b.counts_by_status()["InProgress"] == 1
    finally:
        a.close()
        b.close()


_CHILD = """
import sys
from murphy.exceptions import ConcurrentUpdate
from murphy.store import SqlJobStore
store = SqlJobStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
for _ in range(int(sys.argv[2])):
    while True:
        rec = store.get("job-a")
        rec.notes["child"] = rec.notes.get("child", 0) + 1
        try:
            store.update(rec)
            break
        except ConcurrentUpdate:
            pass
store.close()
"""


def test_two_processes_update_one_database(sql_url: str) -> None:
    rounds = 30
    store = SqlJobStore(sql_url)
    try:
        store.create(make_record("job-a"))
        child = subprocess.Popen([sys.executable, "-c", _CHILD, sql_url, str(rounds)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None and child.stdin is not None
            assert child.stdout.readline().strip() == "ready"
            child.stdin.write("go\n")
            child.stdin.flush()
            for _ in range(rounds):
                while True:
                    rec = store.get("job-a")
                    rec.notes["parent"] = rec.notes.get("parent", 0) + 1
                    try:
                        store.update(rec)
                        break
                    except ConcurrentUpdate:
                        pass
            assert child.wait(timeout=120) == 0
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            for stream in (child.stdin, child.stdout):
                if stream is not None:
                    stream.close()
        got = store.get("job-a")
        assert got.notes == {"parent": rounds, "child": rounds}
        assert got.version == 1 + 2 * rounds
    finally:
        store.close()


# --- errors from the database ---------------------------------------------------------------------


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/murphy.db"
    SqlJobStore(url).close()
    engine = sa.create_engine(url, poolclass=NullPool)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE murphy_schema SET version = 99 WHERE component = 'jobs'")
    engine.dispose()
    with pytest.raises(StoreSchemaError, match="version 99"):
        SqlJobStore(url)


def test_an_unreachable_server_is_store_unavailable() -> None:
    # Port 9 (discard) on loopback: nothing listens, the connection is refused at once.
    with pytest.raises(StoreUnavailable):
        SqlJobStore("postgresql://murphy:x@127.0.0.1:9/murphy?connect_timeout=2")


def test_a_locked_sqlite_file_is_store_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import murphy.store.sql as sql_module

    url = f"sqlite:///{tmp_path}/murphy.db"
    monkeypatch.setattr(sql_module, "SQLITE_BUSY_TIMEOUT_S", 0.2)
    store = SqlJobStore(url)
    engine = sa.create_engine(url, poolclass=NullPool, connect_args={"isolation_level": None})
    try:
        with engine.connect() as holder:
            holder.exec_driver_sql("BEGIN IMMEDIATE")  # another writer holds the lock
            with pytest.raises(StoreUnavailable, match="locked"):
                store.create(make_record("job-a"))
            holder.exec_driver_sql("ROLLBACK")
        store.create(make_record("job-a"))
        assert store.get("job-a").version == 1
    finally:
        engine.dispose()
        store.close()
