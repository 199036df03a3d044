"""The in-memory store's dashboard sessions (same contract as :mod:`murphy.store.sql_sessions`)."""

from __future__ import annotations

import threading

from murphy.store.base import UiSession


class MemoryUiSessions:
    """Mixin of :class:`murphy.store.memory.InMemoryJobStore` (and the default table of
    :class:`murphy.auth.sessions.Sessions`): its session methods."""

    def __init__(self) -> None:
        self._slock = threading.Lock()
        self._sessions: dict[str, UiSession] = {}

    def put_ui_session(self, session: UiSession) -> None:
        with self._slock:
            self._sessions[session.digest] = session

    def get_ui_session(self, digest: str) -> UiSession | None:
        return self._sessions.get(digest)

    def delete_ui_session(self, digest: str) -> None:
        with self._slock:
            self._sessions.pop(digest, None)

    def count_ui_sessions(self) -> int:
        return len(self._sessions)

    def delete_expired_ui_sessions(self, before: float) -> int:
        with self._slock:
            gone = [d for d, s in self._sessions.items() if s.expires_at <= before]
            for d in gone:
                del self._sessions[d]
        return len(gone)

    def delete_oldest_ui_sessions(self, n: int) -> int:
        with self._slock:
            gone = sorted(self._sessions, key=lambda d: self._sessions[d].expires_at)[:max(0, n)]
            for d in gone:
                del self._sessions[d]
        return len(gone)
