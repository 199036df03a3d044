"""The dashboard's browser sessions under ``--auth sigv4``: a browser cannot SigV4-sign, so a
person logs in once with an access key id and secret and gets a session cookie instead.

A session is a random server-side id (256 bits from :mod:`secrets`), kept only by its SHA-256 (a
copy of the table opens nothing), with an expiry and a per-session CSRF token. The session names
the access key, never its secret: every request re-resolves the key through the verifier's cache,
so a disabled or deleted key ends its sessions within ``auth_key_cache_s``. The table is the job
store's (:class:`murphy.store.base.UiSessionStore`: memory, SQLite, PostgreSQL), so a restarted
server, or a second one on the same database, keeps everyone logged in; expired rows are swept at
every login.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable

from murphy.auth.keys import ResolvedKey
from murphy.store.base import UiSession, UiSessionStore
from murphy.store.memory_sessions import MemoryUiSessions

COOKIE = "murphy_session"
#: Readable by the page's script, which echoes it in :data:`CSRF_HEADER` on state-changing calls.
CSRF_COOKIE = "murphy_csrf"
CSRF_HEADER = "x-murphy-csrf"
DEFAULT_TTL_S = 12 * 3600.0
MAX_SESSIONS = 10_000
#: Compared against when the key id is unknown, so both failures take the same time.
_DUMMY_SECRET = "d" * 40


#: What a session is (the job store's record of it).
Session = UiSession


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class Sessions:
    """The session table over a :class:`UiSessionStore` (default: one of this process's own)."""

    def __init__(self, ttl_s: float = DEFAULT_TTL_S, clock: Callable[[], float] = time.time,
                 max_sessions: int = MAX_SESSIONS, store: UiSessionStore | None = None) -> None:
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._clock = clock
        self._lock = threading.Lock()
        self.store: UiSessionStore = store if store is not None else MemoryUiSessions()

    def create(self, access_key_id: str) -> tuple[str, Session]:
        """A new session for a key whose secret was just checked: (the cookie's value, the session)."""
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        session = UiSession(_digest(session_id), access_key_id, secrets.token_urlsafe(32), now + self.ttl_s)
        with self._lock:
            self.store.delete_expired_ui_sessions(now)
            if self.store.count_ui_sessions() >= self.max_sessions:  # full of live ones: the oldest go
                self.store.delete_oldest_ui_sessions(max(1, self.max_sessions // 10))
            self.store.put_ui_session(session)
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        found = self.store.get_ui_session(_digest(session_id))
        if found is None:
            return None
        if found.expires_at <= self._clock():
            self.store.delete_ui_session(found.digest)
            return None
        return found

    def end(self, session_id: str | None) -> None:
        if session_id:
            self.store.delete_ui_session(_digest(session_id))

    def __len__(self) -> int:
        return self.store.count_ui_sessions()


def csrf_ok(session: Session, given: str | None) -> bool:
    """The per-session token, compared in constant time."""
    return bool(given) and hmac.compare_digest(session.csrf.encode(), (given or "").encode())


def key_usable(key: ResolvedKey | None, now: float) -> bool:
    """A key a session may stand on: present, active, long-term (a temporary key needs its session
    token, which a login form does not take) or not yet expired."""
    if key is None or not key.active or key.session_token_sha256 is not None:
        return False
    return key.expires_at is None or now < key.expires_at


def secret_matches(key: ResolvedKey | None, secret: str, now: float) -> bool:
    """The login check: constant-time over the secret, the same work whether or not the id exists."""
    expected = key.secret if key is not None else _DUMMY_SECRET
    same = hmac.compare_digest(expected.encode("utf-8"), secret.encode("utf-8"))
    return same and key_usable(key, now)


def cookies(header: str | None) -> dict[str, str]:
    """A Cookie header's name=value pairs (the first of a repeated name wins, as browsers send
    the most specific first)."""
    found: dict[str, str] = {}
    for part in (header or "").split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name and name not in found:
            found[name] = value
    return found


def set_cookie(name: str, value: str, *, max_age: int, secure: bool, http_only: bool) -> str:
    attrs = [f"{name}={value}", "Path=/", f"Max-Age={max_age}", "SameSite=Strict"]
    if http_only:
        attrs.append("HttpOnly")
    if secure:
        attrs.append("Secure")
    return "; ".join(attrs)
