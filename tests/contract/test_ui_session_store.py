"""The dashboard-session table on every backend (memory, SQLite, PostgreSQL): put, get, delete,
count, expiry and eviction; and :class:`murphy.auth.sessions.Sessions` over it, so a session
created through one store object is valid through another on the same database (a restarted or
second server)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from contract.jobstore_support import pg_schema_url
from murphy.auth.sessions import Sessions
from murphy.store import open_job_store
from murphy.store.base import UiSession, UiSessionStore


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], UiSessionStore]]:
    """Opens the same database again at each call (memory: the same object)."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/murphy.db"
    else:
        url = pg_schema_url(request.getfixturevalue("postgres_url"))
    opened: list[UiSessionStore] = []

    def open_() -> UiSessionStore:
        if opened and request.param == "memory":
            return opened[0]
        s = open_job_store(url)
        assert isinstance(s, UiSessionStore)
        opened.append(s)
        return s

    yield open_
    for s in opened:
        s.close()  # type: ignore[attr-defined]


def session(digest: str, expires_at: float) -> UiSession:
    return UiSession(digest, "AKIA" + digest, "csrf-" + digest, expires_at)


def test_put_get_delete_count(opener: Callable[[], UiSessionStore]) -> None:
    store = opener()
    a, b = session("a" * 64, 10.0), session("b" * 64, 20.0)
    store.put_ui_session(a)
    store.put_ui_session(b)
    assert store.get_ui_session("a" * 64) == a and store.get_ui_session("c" * 64) is None
    assert store.count_ui_sessions() == 2
    store.delete_ui_session("a" * 64)
    store.delete_ui_session("a" * 64)  # a missing one is no error
    assert store.get_ui_session("a" * 64) is None and store.count_ui_sessions() == 1


def test_expiry_and_eviction_of_the_oldest(opener: Callable[[], UiSessionStore]) -> None:
    store = opener()
    for i, exp in enumerate([5.0, 10.0, 15.0, 20.0, 25.0]):
        store.put_ui_session(session(str(i) * 64, exp))
    assert store.delete_expired_ui_sessions(10.0) == 2  # at or before
    assert store.delete_oldest_ui_sessions(2) == 2
    assert store.delete_oldest_ui_sessions(0) == 0
    assert [store.get_ui_session(str(i) * 64) is not None for i in range(5)] == [False] * 4 + [True]


def test_a_session_outlives_the_store_object_that_made_it(opener: Callable[[], UiSessionStore]) -> None:
    clock = [1_000.0]
    first = Sessions(ttl_s=60, clock=lambda: clock[0], store=opener())
    sid, made = first.create("AKIA1")
    other = Sessions(ttl_s=60, clock=lambda: clock[0], store=opener())  # a restarted server
    assert other.get(sid) == made and other.get(sid + "x") is None
    other.end(sid)  # logout on one server ends it on the other
    assert first.get(sid) is None
    sid, _ = first.create("AKIA1")
    clock[0] += 60
    assert other.get(sid) is None and len(other) == 0  # expired: refused and removed
