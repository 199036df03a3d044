"""The dashboard's browser sessions under ``--auth sigv4``: a browser cannot SigV4-sign, so a
person logs in once with an access key id and secret and gets a session cookie instead.

A session is a random server-side id (256 bits from :mod:`secrets`), kept in memory only by its
SHA-256 (a copy of the table opens nothing), with an expiry and a per-session CSRF token. The
session names the access key, never its secret: every request re-resolves the key through the
verifier's cache, so a disabled or deleted key ends its sessions within ``auth_key_cache_s``.
Sessions end with the server process (a restart logs everyone out), which is the simple, safe
choice for a single-process control plane.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from murphy.auth.keys import ResolvedKey

COOKIE = "murphy_session"
#: Readable by the page's script, which echoes it in :data:`CSRF_HEADER` on state-changing calls.
CSRF_COOKIE = "murphy_csrf"
CSRF_HEADER = "x-murphy-csrf"
DEFAULT_TTL_S = 12 * 3600.0
MAX_SESSIONS = 10_000
#: Compared against when the key id is unknown, so both failures take the same time.
_DUMMY_SECRET = "d" * 40


@dataclass(frozen=True)
class Session:
    access_key_id: str
    csrf: str
    expires_at: float


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class Sessions:
    def __init__(self, ttl_s: float = DEFAULT_TTL_S, clock: Callable[[], float] = time.time,
                 max_sessions: int = MAX_SESSIONS) -> None:
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._clock = clock
        self._lock = threading.Lock()
        self._by_digest: dict[str, Session] = {}

    def create(self, access_key_id: str) -> tuple[str, Session]:
        """A new session for a key whose secret was just checked: (the cookie's value, the session)."""
        session_id = secrets.token_urlsafe(32)
        session = Session(access_key_id, secrets.token_urlsafe(32), self._clock() + self.ttl_s)
        with self._lock:
            if len(self._by_digest) >= self.max_sessions:
                self._sweep()
            if len(self._by_digest) >= self.max_sessions:  # still full of live ones: the oldest go
                for old in sorted(self._by_digest, key=lambda d: self._by_digest[d].expires_at)[:self.max_sessions // 10]:
                    del self._by_digest[old]
            self._by_digest[_digest(session_id)] = session
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        digest = _digest(session_id)
        found = self._by_digest.get(digest)
        if found is None:
            return None
        if found.expires_at <= self._clock():
            self.end(session_id)
            return None
        return found

    def end(self, session_id: str | None) -> None:
        if session_id:
            with self._lock:
                self._by_digest.pop(_digest(session_id), None)

    def __len__(self) -> int:
        return len(self._by_digest)

    def _sweep(self) -> None:
        now = self._clock()
        for digest in [d for d, s in self._by_digest.items() if s.expires_at <= now]:
            del self._by_digest[digest]


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
