"""The SQL store's dashboard-session table (``murphy.auth.sessions``), beside the key table.

One row per session, keyed by the SHA-256 of the session id (the id itself is never stored).
"""

from __future__ import annotations

import contextlib

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from murphy.store.base import UiSession

#: The sessions component's schema version (row "sessions" in murphy_schema).
SESSIONS_SCHEMA_VERSION = 1

sessions_metadata = sa.MetaData()

ui_sessions = sa.Table(
    "ui_sessions",
    sessions_metadata,
    sa.Column("digest", sa.String(64), primary_key=True),
    sa.Column("access_key_id", sa.String(128), nullable=False),
    sa.Column("csrf", sa.String(128), nullable=False),
    sa.Column("expires_at", sa.Double, nullable=False, index=True),
)

_s = ui_sessions.c


class SqlUiSessionsMixin:
    """The session methods of :class:`murphy.store.sql.SqlJobStore` (which provides ``_tx``)."""

    def _tx(self, what: str, *, write: bool = False) -> contextlib.AbstractContextManager[Connection]:
        raise NotImplementedError

    def put_ui_session(self, session: UiSession) -> None:
        with self._tx("put dashboard session", write=True) as conn:
            conn.execute(ui_sessions.insert().values(
                digest=session.digest, access_key_id=session.access_key_id, csrf=session.csrf,
                expires_at=session.expires_at))

    def get_ui_session(self, digest: str) -> UiSession | None:
        with self._tx("get dashboard session") as conn:
            row = conn.execute(sa.select(ui_sessions).where(_s.digest == digest)).first()
        return None if row is None else UiSession(row.digest, row.access_key_id, row.csrf, row.expires_at)

    def delete_ui_session(self, digest: str) -> None:
        with self._tx("delete dashboard session", write=True) as conn:
            conn.execute(ui_sessions.delete().where(_s.digest == digest))

    def count_ui_sessions(self) -> int:
        with self._tx("count dashboard sessions") as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(ui_sessions)).scalar_one())

    def delete_expired_ui_sessions(self, before: float) -> int:
        with self._tx("delete expired dashboard sessions", write=True) as conn:
            return int(conn.execute(ui_sessions.delete().where(_s.expires_at <= before)).rowcount)

    def delete_oldest_ui_sessions(self, n: int) -> int:
        if n <= 0:
            return 0
        oldest = sa.select(_s.digest).order_by(_s.expires_at, _s.digest).limit(n)
        with self._tx("delete oldest dashboard sessions", write=True) as conn:
            return int(conn.execute(ui_sessions.delete().where(_s.digest.in_(oldest))).rowcount)
