"""Where training-job records live: the :class:`JobStore` boundary and its implementations."""

from __future__ import annotations

from murphy.store.base import JobQuery, JobStore
from murphy.store.memory import InMemoryJobStore
from murphy.store.sql import SqlJobStore

__all__ = ["InMemoryJobStore", "JobQuery", "JobStore", "SqlJobStore", "open_job_store"]


def open_job_store(url: str) -> JobStore:
    """``memory://`` → a fresh :class:`InMemoryJobStore`; any SQLAlchemy URL → :class:`SqlJobStore`
    (``sqlite:////abs/path.db``, ``postgresql+psycopg://user:pw@host/db``)."""
    if url == "memory://":
        return InMemoryJobStore()
    return SqlJobStore(url)
