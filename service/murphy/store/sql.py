"""The SQL job store (SQLAlchemy Core): SQLite in WAL mode by default, PostgreSQL by URL.

One row per job: the whole :class:`JobRecord` as JSON text in ``record`` plus the columns that
ListTrainingJobs filters and sorts on, so paging happens in SQL. ``version`` carries optimistic
concurrency: :meth:`SqlJobStore.update` is ``UPDATE ... WHERE name = :n AND version = :v``, so
the API and the supervisor never overwrite each other's changes.

SQLite: every write transaction starts with ``BEGIN IMMEDIATE`` (it takes the write lock up
front, so a writer waits on ``busy_timeout`` instead of failing on a lock upgrade); reads run in
deferred transactions and, in WAL mode, never block or get blocked by the writer. That holds for
many threads and for several processes on the same file.

Every database error leaves this module as a :class:`murphy.exceptions.StoreError` (see
:func:`_mapped`).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.pool import StaticPool

from murphy.exceptions import (
    ConcurrentUpdate,
    JobExists,
    JobNotFound,
    StoreError,
    StoreSchemaError,
    StoreUnavailable,
)
from murphy.jobs.model import TERMINAL_JOB, JobRecord, TrainingJobStatus
from murphy.store.base import EventBuilder, EventListener, JobQuery
from murphy.store.sql_events import (
    EVENTS_SCHEMA_VERSION,
    SqlEventsMixin,
    append_events,
    events_metadata,
)
from murphy.store.sql_events import DuplicateKey as _Duplicate
from murphy.store.sql_keys import KEYS_SCHEMA_VERSION, SqlKeysMixin, keys_metadata
from murphy.store.sql_sessions import SESSIONS_SCHEMA_VERSION, SqlUiSessionsMixin, sessions_metadata

#: Bump with a migration step in :meth:`SqlJobStore._create_schema`.
SCHEMA_VERSION = 1
#: How long a SQLite writer waits for another one (another thread or process) to commit.
SQLITE_BUSY_TIMEOUT_S = 5.0
# pg_advisory_xact_lock key serialising schema creation between processes ("murphy" + 1).
_PG_SCHEMA_LOCK = 0x6D75727068790001
_TERMINAL = sorted(s.value for s in TERMINAL_JOB)

metadata = sa.MetaData()

training_jobs = sa.Table(
    "training_jobs",
    metadata,
    sa.Column("name", sa.String(63), primary_key=True),
    sa.Column("arn", sa.String(256), nullable=False),
    sa.Column("account", sa.String(32), nullable=False),
    sa.Column("region", sa.String(32), nullable=False),
    sa.Column("status", sa.String(32), nullable=False, index=True),
    sa.Column("secondary_status", sa.String(32), nullable=False),
    sa.Column("creation_time", sa.Double, nullable=False, index=True),
    sa.Column("last_modified_time", sa.Double, nullable=False, index=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("record", sa.Text, nullable=False),
)

murphy_schema = sa.Table(
    "murphy_schema",
    metadata,
    sa.Column("component", sa.String(32), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
)

_jobs = training_jobs.c



# --- errors: the one place database exceptions are translated --------------------------------


def _is_transient(e: exc.SQLAlchemyError) -> bool:
    if isinstance(e, (exc.TimeoutError, exc.DisconnectionError)):
        return True
    if not isinstance(e, exc.OperationalError):
        return False
    if type(e.orig).__module__ != "sqlite3":
        return True  # PostgreSQL: connection refused/lost, admin shutdown, ...
    # sqlite3 also raises OperationalError for "no such table" and SQL errors: not transient.
    msg = str(e.orig).lower()
    return any(w in msg for w in ("locked", "busy", "unable to open", "disk i/o"))


@contextlib.contextmanager
def _mapped(what: str) -> Iterator[None]:
    try:
        yield
    except exc.IntegrityError as e:
        raise _Duplicate(f"{what}: {e.orig}") from e
    except exc.SQLAlchemyError as e:
        detail = getattr(e, "orig", None) or e
        if _is_transient(e):
            raise StoreUnavailable(f"{what}: database unavailable: {detail}") from e
        raise StoreError(f"{what}: {detail}") from e


# --- engine -----------------------------------------------------------------------------------


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control away from pysqlite so "begin" below decides the BEGIN kind.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
            cur.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL is durable against process crashes; only a power cut can lose the
            # last commits, never corrupt the file.
            cur.execute("PRAGMA synchronous = NORMAL")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("murphy_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _make_engine(url: str) -> tuple[Engine, bool]:
    """The engine for ``url`` and whether it is a private in-memory SQLite database."""
    u = make_url(url)
    if u.drivername == "postgresql":
        u = u.set(drivername="postgresql+psycopg")  # psycopg 3 is the driver murphy ships with
    if u.get_backend_name() != "sqlite":
        return sa.create_engine(u, pool_pre_ping=True), False
    database = u.database or ""
    if database in ("", ":memory:"):
        # One connection, shared: separate connections would each see an empty database.
        engine = sa.create_engine(u, poolclass=StaticPool, connect_args={"check_same_thread": False})
        _sqlite_pragmas(engine)
        return engine, True
    if not u.query.get("uri"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(
        u, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S}
    )
    _sqlite_pragmas(engine)
    return engine, False


# --- rows -------------------------------------------------------------------------------------


def _values(record: JobRecord, version: int) -> dict[str, Any]:
    d = record.to_dict()
    d["version"] = version
    return {
        "name": record.name,
        "arn": record.arn,
        "account": record.account,
        "region": record.region,
        "status": record.status.value,
        "secondary_status": record.secondary.value,
        "creation_time": record.creation_time,
        "last_modified_time": record.last_modified_time,
        "version": version,
        "record": json.dumps(d),
    }


def _decode(text: str, version: int) -> JobRecord:
    # The column is the truth for the version; the JSON copy is only informative.
    return JobRecord.from_dict({**json.loads(text), "version": version})


class SqlJobStore(SqlEventsMixin, SqlKeysMixin, SqlUiSessionsMixin):
    """A :class:`murphy.store.base.JobStore` in any SQLAlchemy database (SQLite, PostgreSQL)."""

    def __init__(self, url: str) -> None:
        self._builder: EventBuilder | None = None
        self._on_appended: EventListener | None = None
        self._engine, in_memory = _make_engine(url)
        self._dialect = self._engine.dialect.name
        # A shared in-memory connection cannot hold two transactions: take turns.
        self._serial: contextlib.AbstractContextManager[Any] = (
            threading.Lock() if in_memory else contextlib.nullcontext()
        )
        try:
            self._create_schema()
        except BaseException:
            self._engine.dispose()
            raise

    @property
    def url(self) -> str:
        """The database URL with the password hidden."""
        return self._engine.url.render_as_string(hide_password=True)

    # --- JobStore -----------------------------------------------------------------------------

    def create(self, record: JobRecord) -> JobRecord:
        values = _values(record, 1)
        created = _decode(values["record"], 1)
        last = 0
        try:
            with self._tx("create " + record.name, write=True) as conn:
                conn.execute(training_jobs.insert().values(values))
                last = self._append(conn, None, created)
        except _Duplicate as e:
            raise JobExists(record.name) from e
        self._appended(last)
        return created

    def get(self, name: str) -> JobRecord:
        with self._tx("get " + name) as conn:
            row = conn.execute(
                sa.select(_jobs.record, _jobs.version).where(_jobs.name == name)
            ).first()
        if row is None:
            raise JobNotFound(name)
        return _decode(row.record, row.version)

    def update(self, record: JobRecord) -> JobRecord:
        with self._tx("update " + record.name, write=True) as conn:
            if self._builder is None:
                return self._write(conn, record)
            # The row as it is now, locked (PostgreSQL) until commit: exactly what we replace.
            row = conn.execute(
                sa.select(_jobs.record, _jobs.version).where(_jobs.name == record.name)
                .with_for_update()
            ).first()
            old = None if row is None else _decode(row.record, row.version)
            updated = self._write(conn, record)
            last = self._append(conn, old, updated)
        self._appended(last)
        return updated

    def query(self, q: JobQuery) -> list[JobRecord]:
        stmt = sa.select(_jobs.record, _jobs.version)
        if q.account is not None:
            stmt = stmt.where(_jobs.account == q.account)
        if q.name_contains is not None:
            stmt = stmt.where(self._contains(q.name_contains))
        if q.status_equals is not None:
            stmt = stmt.where(_jobs.status == TrainingJobStatus(q.status_equals).value)
        # AWS semantics: *After* is strictly greater, *Before* strictly less.
        if q.creation_time_after is not None:
            stmt = stmt.where(_jobs.creation_time > q.creation_time_after)
        if q.creation_time_before is not None:
            stmt = stmt.where(_jobs.creation_time < q.creation_time_before)
        if q.last_modified_time_after is not None:
            stmt = stmt.where(_jobs.last_modified_time > q.last_modified_time_after)
        if q.last_modified_time_before is not None:
            stmt = stmt.where(_jobs.last_modified_time < q.last_modified_time_before)
        name = self._text_order(_jobs.name)
        keys: list[Any] = {
            "Name": [name],
            "CreationTime": [_jobs.creation_time, name],
            "Status": [self._text_order(_jobs.status), name],
        }[q.sort_by]
        # Ties go by name in the same direction: Descending is exactly Ascending reversed.
        if q.sort_order == "Descending":
            keys = [k.desc() for k in keys]
        stmt = stmt.order_by(*keys).offset(q.offset).limit(q.limit)
        with self._tx("query") as conn:
            rows = conn.execute(stmt).all()
        return [_decode(r.record, r.version) for r in rows]

    def active(self) -> list[JobRecord]:
        stmt = (
            sa.select(_jobs.record, _jobs.version)
            .where(_jobs.status.not_in(_TERMINAL))
            .order_by(_jobs.creation_time, self._text_order(_jobs.name))
        )
        with self._tx("active") as conn:
            rows = conn.execute(stmt).all()
        return [_decode(r.record, r.version) for r in rows]

    def counts_by_status(self) -> dict[str, int]:
        counts = {s.value: 0 for s in TrainingJobStatus}
        stmt = sa.select(_jobs.status, sa.func.count()).group_by(_jobs.status)
        with self._tx("counts") as conn:
            for row in conn.execute(stmt).all():
                counts[str(row[0])] = int(row[1])
        return counts

    def close(self) -> None:
        self._engine.dispose()

    def set_event_builder(self, builder: EventBuilder | None,
                          on_appended: EventListener | None = None) -> None:
        self._builder, self._on_appended = builder, on_appended

    # --- internals ------------------------------------------------------------------------------

    def _append(self, conn: Connection, old: JobRecord | None, new: JobRecord) -> int:
        if self._builder is None:
            return 0
        return append_events(conn, self._dialect, self._builder(old, new), new.name, time.time())

    def _appended(self, last: int) -> None:
        if last and self._on_appended is not None:
            self._on_appended(last)

    @contextlib.contextmanager
    def _tx(self, what: str, *, write: bool = False) -> Iterator[Connection]:
        """One transaction, committed on success; every database error is mapped here."""
        with self._serial, _mapped(what), self._engine.connect() as conn:
            if write:
                conn.execution_options(murphy_write=True)
            with conn.begin():
                yield conn

    def _write(self, conn: Connection, record: JobRecord) -> JobRecord:
        """The conditional write, inside the caller's transaction (so that rows for other tables,
        e.g. an event outbox, can be written in the same transaction as the status change)."""
        values = _values(record, record.version + 1)
        result = conn.execute(
            training_jobs.update()
            .where(_jobs.name == record.name, _jobs.version == record.version)
            .values(values)
        )
        if result.rowcount != 1:
            exists = conn.execute(sa.select(_jobs.version).where(_jobs.name == record.name)).first()
            if exists is None:
                raise JobNotFound(record.name)
            raise ConcurrentUpdate(record.name, record.version)
        return _decode(values["record"], values["version"])

    def _contains(self, needle: str) -> sa.ColumnElement[bool]:
        # Case-sensitive everywhere (SQLite's LIKE ignores ASCII case).
        if self._dialect == "sqlite":
            return sa.func.instr(_jobs.name, needle) > 0
        if self._dialect == "postgresql":
            return sa.func.strpos(_jobs.name, needle) > 0
        return _jobs.name.contains(needle, autoescape=True)

    def _text_order(self, col: sa.ColumnElement[str]) -> sa.ColumnElement[str]:
        # PostgreSQL's default collation is the locale's (e.g. en_US: "a-b" sorts after "ab");
        # byte order ("C") matches SQLite and the in-memory store.
        return col.collate("C") if self._dialect == "postgresql" else col

    def _create_schema(self) -> None:
        with self._tx("create schema", write=True) as conn:
            if self._dialect == "postgresql":
                # Two processes opening a fresh database at once would race on CREATE TABLE.
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_SCHEMA_LOCK)))
            metadata.create_all(conn)
            events_metadata.create_all(conn)
            keys_metadata.create_all(conn)
            sessions_metadata.create_all(conn)
            for component, known in (("jobs", SCHEMA_VERSION), ("events", EVENTS_SCHEMA_VERSION),
                                     ("keys", KEYS_SCHEMA_VERSION), ("sessions", SESSIONS_SCHEMA_VERSION)):
                found = conn.execute(
                    sa.select(murphy_schema.c.version).where(murphy_schema.c.component == component)
                ).scalar_one_or_none()
                if found is None:
                    conn.execute(murphy_schema.insert().values(component=component, version=known))
                elif found > known:
                    raise StoreSchemaError(
                        f"the database has {component.rstrip('s')}-store schema version {found}; this murphy "
                        f"knows up to {known}: upgrade murphy"
                    )
