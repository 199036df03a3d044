"""The dashboard's session table and its checks (murphy.auth.sessions), unit-level."""

from __future__ import annotations

import dataclasses
from typing import Any

from murphy.auth import sessions as s
from murphy.auth.keys import ResolvedKey


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


BASE = ResolvedKey("AKIA" + "A" * 16, "111111111111", "alice", True, None, None, None, secret="s" * 40)


def key(**over: Any) -> ResolvedKey:
    return dataclasses.replace(BASE, **over)


def test_a_session_is_random_kept_by_digest_and_expires() -> None:
    clock = Clock()
    table = s.Sessions(ttl_s=60, clock=clock)
    sid, session = table.create("AKIA1")
    other, _ = table.create("AKIA1")
    assert sid != other and len(sid) >= 43 and session.csrf != sid
    assert table.get(sid) == session and session.expires_at == 1_060.0
    stored = table.store.get_ui_session(session.digest)
    assert stored == session and sid not in repr(stored)  # only the digest is kept
    assert table.get("not-a-session") is None and table.get("") is None and table.get(None) is None
    clock.now = 1_059.9
    assert table.get(sid) == session
    clock.now = 1_060.0
    assert table.get(sid) is None and len(table) == 1  # the expired one is dropped when seen
    table.end(other)
    assert table.get(other) is None and len(table) == 0


def test_a_full_table_sweeps_expired_then_drops_the_oldest() -> None:
    clock = Clock()
    table = s.Sessions(ttl_s=10, clock=clock, max_sessions=10)
    first = [table.create("AKIA1")[0] for _ in range(10)]
    clock.now += 20
    table.ttl_s = 100
    fresh = table.create("AKIA1")[0]
    assert len(table) == 1 and table.get(fresh) is not None and table.get(first[0]) is None
    for _ in range(9):
        clock.now += 1
        table.create("AKIA1")
    clock.now += 1
    table.create("AKIA1")
    assert len(table) == 10 and table.get(fresh) is None  # the oldest live one made room


def test_csrf_needs_the_sessions_own_token() -> None:
    _, session = s.Sessions().create("AKIA1")
    assert s.csrf_ok(session, session.csrf)
    assert not s.csrf_ok(session, None) and not s.csrf_ok(session, "")
    assert not s.csrf_ok(session, session.csrf[:-1]) and not s.csrf_ok(session, s.Sessions().create("A")[1].csrf)


def test_login_check_refuses_wrong_unknown_disabled_temporary_and_expired_keys() -> None:
    assert s.secret_matches(key(), "s" * 40, 0)
    assert not s.secret_matches(key(), "s" * 39 + "t", 0)
    assert not s.secret_matches(key(), "", 0)
    assert not s.secret_matches(None, "d" * 40, 0)  # the dummy secret opens nothing
    assert not s.secret_matches(key(active=False), "s" * 40, 0)
    assert not s.secret_matches(key(session_token_sha256="ab"), "s" * 40, 0)
    assert not s.secret_matches(key(expires_at=5.0), "s" * 40, 5.0)
    assert s.key_usable(key(expires_at=5.0), 4.0) and not s.key_usable(None, 0)


def test_cookie_parsing_and_attributes() -> None:
    assert s.cookies("a=1; murphy_session=xyz; b=; murphy_session=later") == {"a": "1", "murphy_session": "xyz",
                                                                              "b": ""}
    assert s.cookies(None) == {} and s.cookies("junk") == {}
    assert s.set_cookie("n", "v", max_age=5, secure=True, http_only=True) == \
        "n=v; Path=/; Max-Age=5; SameSite=Strict; HttpOnly; Secure"
    assert s.set_cookie("n", "v", max_age=5, secure=False, http_only=False) == "n=v; Path=/; Max-Age=5; SameSite=Strict"
