"""The in-memory job store: the fake for unit tests, and ``memory://``.

Records are kept as JSON text (``JobRecord.to_dict``), exactly what :class:`SqlJobStore` writes,
so callers never share mutable state with the store and a record that would not survive the
database does not survive here either.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from murphy.exceptions import ConcurrentUpdate, JobExists, JobNotFound
from murphy.jobs.model import TERMINAL_JOB, JobRecord, TrainingJobStatus
from murphy.store.base import EventBuilder, EventListener, JobQuery
from murphy.store.memory_events import MemoryEvents
from murphy.store.memory_keys import MemoryKeys
from murphy.store.memory_sessions import MemoryUiSessions


def _dump(record: JobRecord, version: int) -> str:
    d = record.to_dict()
    d["version"] = version
    return json.dumps(d)


def matches(q: JobQuery, r: JobRecord) -> bool:
    """``q``'s filters, with AWS semantics: *After* is strictly greater, *Before* strictly less."""
    return (
        (q.account is None or r.account == q.account)
        and (q.name_contains is None or q.name_contains in r.name)
        and (q.status_equals is None or r.status == q.status_equals)
        and (q.creation_time_after is None or r.creation_time > q.creation_time_after)
        and (q.creation_time_before is None or r.creation_time < q.creation_time_before)
        and (q.last_modified_time_after is None or r.last_modified_time > q.last_modified_time_after)
        and (q.last_modified_time_before is None or r.last_modified_time < q.last_modified_time_before)
    )


def sort_key(q: JobQuery, r: JobRecord) -> tuple[Any, str]:
    """The sort key; ties go by name in the same direction, so Descending is Ascending reversed."""
    if q.sort_by == "Name":
        return (r.name, r.name)
    if q.sort_by == "Status":
        return (r.status.value, r.name)
    return (r.creation_time, r.name)


def page(q: JobQuery, records: list[JobRecord]) -> list[JobRecord]:
    """Filter, sort and slice ``records`` as ``q`` says."""
    hits = sorted((r for r in records if matches(q, r)), key=lambda r: sort_key(q, r),
                  reverse=q.sort_order == "Descending")
    end = None if q.limit is None else q.offset + q.limit
    return hits[q.offset:end]


class InMemoryJobStore(MemoryEvents, MemoryKeys, MemoryUiSessions):
    """A thread-safe dict of JSON records with the same contract as the SQL store."""

    def __init__(self) -> None:
        MemoryEvents.__init__(self)
        MemoryKeys.__init__(self)
        MemoryUiSessions.__init__(self)
        self._rows: dict[str, str] = {}
        self._lock = threading.Lock()
        self._builder: EventBuilder | None = None
        self._on_appended: EventListener | None = None

    def set_event_builder(self, builder: EventBuilder | None,
                          on_appended: EventListener | None = None) -> None:
        self._builder, self._on_appended = builder, on_appended

    def create(self, record: JobRecord) -> JobRecord:
        row = _dump(record, 1)
        created = JobRecord.from_dict(json.loads(row))
        with self._lock:
            if record.name in self._rows:
                raise JobExists(record.name)
            # Build first: a builder that raises leaves nothing written, as a rollback would.
            events = self._builder(None, created) if self._builder else []
            self._rows[record.name] = row
            last = self._append(events, record.name)
        self._notify(last)
        return created

    def get(self, name: str) -> JobRecord:
        with self._lock:
            row = self._rows.get(name)
        if row is None:
            raise JobNotFound(name)
        return JobRecord.from_dict(json.loads(row))

    def update(self, record: JobRecord) -> JobRecord:
        row = _dump(record, record.version + 1)
        updated = JobRecord.from_dict(json.loads(row))
        with self._lock:
            current = self._rows.get(record.name)
            if current is None:
                raise JobNotFound(record.name)
            if json.loads(current)["version"] != record.version:
                raise ConcurrentUpdate(record.name, record.version)
            old = JobRecord.from_dict(json.loads(current)) if self._builder else None
            events = self._builder(old, updated) if self._builder else []
            self._rows[record.name] = row
            last = self._append(events, record.name)
        self._notify(last)
        return updated

    def _notify(self, last: int) -> None:
        if last and self._on_appended is not None:
            self._on_appended(last)

    def query(self, q: JobQuery) -> list[JobRecord]:
        return page(q, self._all())

    def active(self) -> list[JobRecord]:
        records = [r for r in self._all() if r.status not in TERMINAL_JOB]
        return sorted(records, key=lambda r: (r.creation_time, r.name))

    def counts_by_status(self) -> dict[str, int]:
        counts = {s.value: 0 for s in TrainingJobStatus}
        for r in self._all():
            counts[r.status.value] += 1
        return counts

    def close(self) -> None:
        """Nothing to release; the records stay readable (the fake outlives its users)."""

    def _all(self) -> list[JobRecord]:
        with self._lock:
            rows = list(self._rows.values())
        return [JobRecord.from_dict(json.loads(row)) for row in rows]
