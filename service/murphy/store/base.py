"""The job store boundary: where training-job records live.

Implementations: :class:`murphy.store.memory.InMemoryJobStore` (the fake, for unit tests) and
:class:`murphy.store.sql.SqlJobStore` (SQLAlchemy: SQLite in WAL mode by default, PostgreSQL by
URL). One contract suite (``tests/contract/test_job_store.py``) runs against all of them.

Concurrency is optimistic: every record carries ``version``; :meth:`JobStore.update` writes only
if the stored version still equals the record's, then bumps it. The API (stop, tags) and the
supervisor (status changes) both read-modify-update and retry on :class:`ConcurrentUpdate`, so
neither overwrites the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from murphy.jobs.model import JobRecord, TrainingJobStatus

#: ``fn(old, new) -> envelopes``: the events a create (``old`` None) or update appends to the
#: outbox in the same transaction (``murphy.jobs.events.events_for``). Each envelope's ``id`` is
#: its idempotency key and must be unique.
EventBuilder = Callable[[JobRecord | None, JobRecord], list[dict[str, Any]]]
#: Called after a commit that appended events, with the highest seq written (wakes dispatchers).
EventListener = Callable[[int], None]


@dataclass(frozen=True)
class JobQuery:
    """ListTrainingJobs' filters, sort and page, already validated."""

    name_contains: str | None = None
    status_equals: TrainingJobStatus | None = None
    creation_time_after: float | None = None
    creation_time_before: float | None = None
    last_modified_time_after: float | None = None
    last_modified_time_before: float | None = None
    sort_by: Literal["Name", "CreationTime", "Status"] = "CreationTime"
    sort_order: Literal["Ascending", "Descending"] = "Ascending"
    offset: int = 0
    limit: int | None = None
    #: Only this account's jobs (None: every account's; the supervisor and metrics use that).
    account: str | None = None


@dataclass(frozen=True)
class Subscription:
    """An event subscription: which events (an EventBridge pattern) go where (a target)."""

    id: str
    name: str
    pattern: dict[str, Any]
    #: ``{"type": "webhook", "url", "secret"}`` or ``{"type": "eventbridge", "endpoint_url",
    #: "region", "event_bus_name"}``.
    target: dict[str, Any]
    created_at: float


@dataclass(frozen=True)
class DeadLetter:
    """An event a subscription gave up on after its last attempt (kept until redriven)."""

    subscription_id: str
    seq: int
    event: dict[str, Any]
    attempts: int
    last_error: str
    failed_at: float


@dataclass(frozen=True)
class AccessKey:
    """A murphy access key (``murphy.auth``): what a SigV4 signature is checked against."""

    access_key_id: str
    #: The 12-digit account every request signed with this key acts in.
    account: str
    name: str
    #: The secret access key as stored: sealed (``murphy.events.sealing``), never in clear.
    sealed_secret: str
    status: Literal["Active", "Inactive"]
    created_at: float
    #: Temporary credentials: SHA-256 (hex) of the session token the request must carry, and
    #: when the credentials stop working (epoch seconds).
    session_token_sha256: str | None = None
    expires_at: float | None = None
    #: Actions the key may call (``sagemaker:CreateTrainingJob``, ``murphy:*`` ...); None: all.
    actions: tuple[str, ...] | None = None


@runtime_checkable
class AccessKeyStore(Protocol):
    """Access keys, in the job store's database (both stores implement it)."""

    def create_access_key(self, key: AccessKey) -> None:
        """Raises ``AccessKeyExists`` for a taken id."""
        ...

    def get_access_key(self, access_key_id: str) -> AccessKey:
        """Raises ``AccessKeyNotFound``."""
        ...

    def list_access_keys(self, account: str | None = None) -> list[AccessKey]:
        """Every key (of ``account``), oldest first."""
        ...

    def set_access_key_status(self, access_key_id: str, status: Literal["Active", "Inactive"]) -> None:
        """Raises ``AccessKeyNotFound``."""
        ...

    def delete_access_key(self, access_key_id: str) -> None:
        """Raises ``AccessKeyNotFound``."""
        ...

    def delete_expired_access_keys(self, before: float) -> int:
        """Remove temporary keys that expired before ``before``; returns how many."""
        ...


@dataclass(frozen=True)
class UiSession:
    """A dashboard login session (``murphy.auth.sessions``), kept only by the SHA-256 (hex) of its
    random id: a copy of the table opens nothing. It names the access key, never its secret."""

    digest: str
    access_key_id: str
    #: The session's CSRF token (useless without the session id itself).
    csrf: str
    expires_at: float


@runtime_checkable
class UiSessionStore(Protocol):
    """The dashboard's login sessions in the job store's database (both stores implement it), so
    a restarted server, or a second one on the same database, keeps everyone logged in."""

    def put_ui_session(self, session: UiSession) -> None:
        ...

    def get_ui_session(self, digest: str) -> UiSession | None:
        """The session, expired or not (the caller checks); None when there is none."""
        ...

    def delete_ui_session(self, digest: str) -> None:
        """No error when there is none."""
        ...

    def count_ui_sessions(self) -> int:
        ...

    def delete_expired_ui_sessions(self, before: float) -> int:
        """Remove sessions that expire at or before ``before``; returns how many."""
        ...

    def delete_oldest_ui_sessions(self, n: int) -> int:
        """Remove the ``n`` sessions that expire first; returns how many."""
        ...


@runtime_checkable
class JobStore(Protocol):
    def create(self, record: JobRecord) -> JobRecord:
        """Insert a new record (version becomes 1). Raises ``JobExists`` for a taken name."""
        ...

    def get(self, name: str) -> JobRecord:
        """Raises ``JobNotFound``."""
        ...

    def update(self, record: JobRecord) -> JobRecord:
        """Write ``record`` if the stored version equals ``record.version``; return it with the
        version bumped. Raises ``ConcurrentUpdate`` (stale) or ``JobNotFound``."""
        ...

    def query(self, q: JobQuery) -> list[JobRecord]:
        """Records matching ``q``, sorted (ties broken by name), from ``q.offset``, at most
        ``q.limit``. ``name_contains`` is a case-sensitive substring match."""
        ...

    def active(self) -> list[JobRecord]:
        """Every record whose status is not terminal (what the supervisor reconciles)."""
        ...

    def counts_by_status(self) -> dict[str, int]:
        """``{TrainingJobStatus value: count}`` for metrics."""
        ...

    def close(self) -> None: ...

    # --- events: the outbox (rows written in the same transaction as the record change) -------

    def set_event_builder(self, builder: EventBuilder | None,
                          on_appended: EventListener | None = None) -> None:
        """From now on every create/update appends ``builder(old, new)`` to the outbox in its
        own transaction, then calls ``on_appended(last_seq)`` after the commit."""
        ...

    def events_after(self, seq: int, limit: int = 100) -> list[tuple[int, dict[str, Any]]]:
        """Outbox rows with a seq greater than ``seq``, ascending, at most ``limit``."""
        ...

    def last_event_seq(self) -> int:
        """The highest seq in the outbox (0 when empty)."""
        ...

    def prune_events(self, before: float) -> tuple[int, int]:
        """Delete the outbox rows up to the last one created before ``before`` (the newest row
        always stays, so ``last_event_seq`` and new seqs never go back). Returns (rows deleted,
        highest seq deleted; 0 when none)."""
        ...

    # --- events: subscriptions, their cursors and dead letters --------------------------------

    def create_subscription(self, sub: Subscription, cursor: int | None = None) -> None:
        """Insert ``sub`` with its cursor at ``cursor`` (None: the outbox's end, read in the
        same transaction). Raises ``SubscriptionExists`` for a taken name (or id)."""
        ...

    def list_subscriptions(self) -> list[Subscription]:
        """Every subscription, oldest first."""
        ...

    def get_subscription(self, id_or_name: str) -> Subscription:
        """By id, else by name. Raises ``SubscriptionNotFound``."""
        ...

    def delete_subscription(self, subscription_id: str) -> None:
        """Remove it with its cursor and dead letters. Raises ``SubscriptionNotFound``."""
        ...

    def set_subscription_target(self, subscription_id: str, target: dict[str, Any]) -> None:
        """Replace the subscription's target (the bus re-seals old plain-text secrets with it).
        Raises ``SubscriptionNotFound``."""
        ...

    def get_cursor(self, subscription_id: str) -> int:
        """The seq up to which the subscription is done. Raises ``SubscriptionNotFound``."""
        ...

    def set_cursor(self, subscription_id: str, seq: int) -> None:
        """Move the cursor to ``seq`` (never backwards). Raises ``SubscriptionNotFound``."""
        ...

    def add_dead_letter(self, letter: DeadLetter) -> None:
        """Record (or replace: idempotent on subscription and seq) a dead letter."""
        ...

    def list_dead_letters(self, subscription_id: str | None = None, *,
                          redriving: bool = False) -> list[DeadLetter]:
        """Dead letters (``redriving``: those queued for redelivery instead), by subscription
        then seq."""
        ...

    def redrive_dead_letters(self, subscription_id: str, seqs: list[int] | None = None) -> int:
        """Queue the subscription's dead letters (all, or those at ``seqs``) for redelivery;
        returns how many were queued."""
        ...

    def remove_dead_letter(self, subscription_id: str, seq: int) -> None:
        """Forget a dead letter (delivered on redrive). Missing is not an error."""
        ...

    def prune_dead_letters(self, before: float) -> int:
        """Delete dead letters that failed before ``before`` and are not queued for redrive;
        returns how many."""
        ...
