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

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from murphy.jobs.model import JobRecord, TrainingJobStatus


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
