"""The SQL store's event tables: the outbox, subscriptions (with their cursors) and dead letters.

The outbox is written inside the job write transaction (:func:`append_events`), so an event
exists exactly when the status change that caused it committed. Consumers read it by ``seq``
and keep a cursor; that only works if no row can ever appear *behind* a cursor, i.e. if seqs
become visible in commit order. SQLite serialises writers (``BEGIN IMMEDIATE``), so it holds by
construction; on PostgreSQL a sequence value is taken at INSERT but visible at COMMIT, so two
writers could commit out of order. :func:`append_events` therefore takes a transaction-scoped
advisory lock first: writers that append events commit one at a time (writers that change no
status, and all readers, are not affected).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from murphy.exceptions import StoreError, SubscriptionExists, SubscriptionNotFound
from murphy.store.base import DeadLetter, Subscription

#: The events component's schema version (row "events" in murphy_schema).
EVENTS_SCHEMA_VERSION = 1
# pg_advisory_xact_lock key serialising outbox appends ("murphy" + 2).
_PG_OUTBOX_LOCK = 0x6D75727068790002

events_metadata = sa.MetaData()

class DuplicateKey(StoreError):
    """An integrity violation (a primary or unique key), mapped by ``SqlJobStore._tx``."""


_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite: an alias of ROWID

event_outbox = sa.Table(
    "event_outbox",
    events_metadata,
    sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
    sa.Column("event_id", sa.String(64), nullable=False, unique=True),
    sa.Column("job_name", sa.String(63), nullable=False, index=True),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    # AUTOINCREMENT: SQLite never reuses a seq, even one whose row was deleted.
    sqlite_autoincrement=True,
)

event_subscriptions = sa.Table(
    "event_subscriptions",
    events_metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("pattern", sa.Text, nullable=False),
    sa.Column("target", sa.Text, nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("cursor", sa.BigInteger, nullable=False),
)

event_dead_letters = sa.Table(
    "event_dead_letters",
    events_metadata,
    sa.Column("subscription_id", sa.String(64), primary_key=True),
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("event", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("last_error", sa.Text, nullable=False),
    sa.Column("failed_at", sa.Double, nullable=False),
    sa.Column("redrive", sa.Boolean, nullable=False, default=False),
)

_out = event_outbox.c
_subs = event_subscriptions.c
_dead = event_dead_letters.c


def append_events(conn: Connection, dialect: str, events: list[dict[str, Any]], job_name: str,
                  now: float) -> int:
    """Insert ``events`` in the caller's transaction; returns the last seq (0 if none)."""
    if not events:
        return 0
    if dialect == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_OUTBOX_LOCK)))
    last = 0
    for ev in events:
        result = conn.execute(
            event_outbox.insert().values(
                event_id=str(ev["id"]), job_name=job_name, created_at=now,
                body=json.dumps(ev, separators=(",", ":")),
            )
        )
        key = result.inserted_primary_key
        last = int(key[0]) if key is not None else last
    return last


def _subscription(row: Any) -> Subscription:
    return Subscription(row.id, row.name, json.loads(row.pattern), json.loads(row.target), row.created_at)


def _letter(row: Any) -> DeadLetter:
    return DeadLetter(row.subscription_id, int(row.seq), json.loads(row.event), row.attempts,
                      row.last_error, row.failed_at)


class SqlEventsMixin:
    """The event methods of :class:`murphy.store.sql.SqlJobStore` (which provides ``_tx``)."""

    def _tx(self, what: str, *, write: bool = False) -> contextlib.AbstractContextManager[Connection]:
        raise NotImplementedError

    # --- outbox ---------------------------------------------------------------------------------

    def events_after(self, seq: int, limit: int = 100) -> list[tuple[int, dict[str, Any]]]:
        stmt = (sa.select(_out.seq, _out.body).where(_out.seq > seq).order_by(_out.seq)
                .limit(max(0, limit)))
        with self._tx("events after") as conn:
            rows = conn.execute(stmt).all()
        return [(int(r.seq), json.loads(r.body)) for r in rows]

    def last_event_seq(self) -> int:
        with self._tx("last event seq") as conn:
            return _max_seq(conn)

    def prune_events(self, before: float) -> tuple[int, int]:
        with self._tx("prune events", write=True) as conn:
            newest = _max_seq(conn)
            # Delete a prefix by seq, never a row in the middle: a reader's cursor then always
            # points at or before the oldest row left.
            cut = conn.execute(sa.select(sa.func.coalesce(sa.func.max(_out.seq), 0))
                               .where(_out.created_at < before, _out.seq < newest)).scalar_one()
            if not cut:
                return 0, 0
            gone = conn.execute(event_outbox.delete().where(_out.seq <= cut)).rowcount
        return int(gone), int(cut)

    # --- subscriptions --------------------------------------------------------------------------

    def create_subscription(self, sub: Subscription, cursor: int | None = None) -> None:
        try:
            with self._tx("create subscription " + sub.name, write=True) as conn:
                taken = conn.execute(
                    sa.select(_subs.id).where(sa.or_(_subs.name == sub.name, _subs.id == sub.id))
                ).first()
                if taken is not None:
                    raise SubscriptionExists(sub.name)
                conn.execute(event_subscriptions.insert().values(
                    id=sub.id, name=sub.name, pattern=json.dumps(sub.pattern),
                    target=json.dumps(sub.target), created_at=sub.created_at,
                    cursor=_max_seq(conn) if cursor is None else cursor,
                ))
        except DuplicateKey as e:
            # Two creators raced past the check: the unique constraint decided.
            raise SubscriptionExists(sub.name) from e

    def list_subscriptions(self) -> list[Subscription]:
        stmt = sa.select(event_subscriptions).order_by(_subs.created_at, _subs.id)
        with self._tx("list subscriptions") as conn:
            return [_subscription(r) for r in conn.execute(stmt).all()]

    def get_subscription(self, id_or_name: str) -> Subscription:
        with self._tx("get subscription") as conn:
            row = conn.execute(sa.select(event_subscriptions).where(_subs.id == id_or_name)).first()
            if row is None:
                row = conn.execute(
                    sa.select(event_subscriptions).where(_subs.name == id_or_name)
                ).first()
        if row is None:
            raise SubscriptionNotFound(id_or_name)
        return _subscription(row)

    def delete_subscription(self, subscription_id: str) -> None:
        with self._tx("delete subscription", write=True) as conn:
            gone = conn.execute(
                event_subscriptions.delete().where(_subs.id == subscription_id)
            ).rowcount
            conn.execute(event_dead_letters.delete().where(_dead.subscription_id == subscription_id))
        if gone != 1:
            raise SubscriptionNotFound(subscription_id)

    def set_subscription_target(self, subscription_id: str, target: dict[str, Any]) -> None:
        with self._tx("set subscription target", write=True) as conn:
            done = conn.execute(event_subscriptions.update().where(_subs.id == subscription_id)
                                .values(target=json.dumps(target))).rowcount
        if done != 1:
            raise SubscriptionNotFound(subscription_id)

    def get_cursor(self, subscription_id: str) -> int:
        with self._tx("get cursor") as conn:
            found = conn.execute(
                sa.select(_subs.cursor).where(_subs.id == subscription_id)
            ).scalar_one_or_none()
        if found is None:
            raise SubscriptionNotFound(subscription_id)
        return int(found)

    def set_cursor(self, subscription_id: str, seq: int) -> None:
        with self._tx("set cursor", write=True) as conn:
            conn.execute(
                event_subscriptions.update()
                .where(_subs.id == subscription_id, _subs.cursor < seq)
                .values(cursor=seq)
            )
            exists = conn.execute(sa.select(_subs.id).where(_subs.id == subscription_id)).first()
        if exists is None:
            raise SubscriptionNotFound(subscription_id)

    # --- dead letters ---------------------------------------------------------------------------

    def add_dead_letter(self, letter: DeadLetter) -> None:
        key = (_dead.subscription_id == letter.subscription_id) & (_dead.seq == letter.seq)
        values = {"event": json.dumps(letter.event), "attempts": letter.attempts,
                  "last_error": letter.last_error, "failed_at": letter.failed_at, "redrive": False}
        with self._tx("add dead letter", write=True) as conn:
            # Delete + insert: a portable upsert (the write lock makes it atomic on both).
            conn.execute(event_dead_letters.delete().where(key))
            conn.execute(event_dead_letters.insert().values(
                subscription_id=letter.subscription_id, seq=letter.seq, **values))

    def list_dead_letters(self, subscription_id: str | None = None, *,
                          redriving: bool = False) -> list[DeadLetter]:
        stmt = sa.select(event_dead_letters).where(_dead.redrive == redriving)
        if subscription_id is not None:
            stmt = stmt.where(_dead.subscription_id == subscription_id)
        stmt = stmt.order_by(_dead.subscription_id, _dead.seq)
        with self._tx("list dead letters") as conn:
            return [_letter(r) for r in conn.execute(stmt).all()]

    def redrive_dead_letters(self, subscription_id: str, seqs: list[int] | None = None) -> int:
        stmt = event_dead_letters.update().where(
            _dead.subscription_id == subscription_id, _dead.redrive == sa.false()
        )
        if seqs is not None:
            stmt = stmt.where(_dead.seq.in_(list(seqs)))
        with self._tx("redrive dead letters", write=True) as conn:
            return int(conn.execute(stmt.values(redrive=True)).rowcount)

    def remove_dead_letter(self, subscription_id: str, seq: int) -> None:
        with self._tx("remove dead letter", write=True) as conn:
            conn.execute(event_dead_letters.delete().where(
                _dead.subscription_id == subscription_id, _dead.seq == seq))

    def prune_dead_letters(self, before: float) -> int:
        with self._tx("prune dead letters", write=True) as conn:
            return int(conn.execute(event_dead_letters.delete().where(
                _dead.failed_at < before, _dead.redrive == sa.false())).rowcount)


def _max_seq(conn: Connection) -> int:
    return int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(_out.seq), 0))).scalar_one())
