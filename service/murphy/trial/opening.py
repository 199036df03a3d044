"""Opening a trial: reader settings (with smdebug's environment overrides) and the wait for the
collections files, which every trial needs before it can say anything."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from murphy.core.collection import Collection, CollectionsDoc
from murphy.exceptions import CorruptCollections, MissingCollectionFiles, ObjectNotFound
from murphy.storage.base import ObjectStore
from murphy.storage.local import LocalObjectStore
from murphy.storage.memory import InMemoryObjectStore
from murphy.tensorio.locations import (
    COLLECTIONS_PREFIX,
    DEFAULT_WORKER_NAME,
    END_OF_TRAINING_KEY,
    collections_file_key,
    worker_from_collections_key,
)

log = logging.getLogger(__name__)

INCOMPLETE_STEP_WAIT_WINDOW_ENV = "SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW"
TRAINING_END_DELAY_REFRESH_ENV = "SMDEBUG_TRAINING_END_DELAY_REFRESH"
DEFAULT_INCOMPLETE_STEP_WAIT_WINDOW = 1000
DEFAULT_END_DELAY_LOCAL = 0.1
DEFAULT_END_DELAY_S3 = 1.0
DEFAULT_MISSING_EVENT_TIMEOUT = 60.0


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return float(raw)
    except ValueError:
        log.warning("ignoring %s=%r: not a number", name, raw)
        return default


@dataclass(frozen=True)
class ReaderSettings:
    """How a trial polls and how long it waits. Built once per trial (never at import)."""

    poll_interval: float = 0.1
    end_delay: float = DEFAULT_END_DELAY_LOCAL
    missing_event_timeout: float = DEFAULT_MISSING_EVENT_TIMEOUT
    no_marker_timeout: float | None = None
    incomplete_step_window: int = DEFAULT_INCOMPLETE_STEP_WAIT_WINDOW

    @classmethod
    def resolve(
        cls,
        store_uri: str,
        *,
        poll_interval: float,
        end_delay: float | None,
        missing_event_timeout: float | None,
        no_marker_timeout: float | None,
    ) -> ReaderSettings:
        """Explicit arguments win, then smdebug's environment variables, then murphy's defaults
        (a short end delay for local stores; S3 keeps smdebug's 1 s for sync lag)."""
        if end_delay is None:
            default = DEFAULT_END_DELAY_S3 if store_uri.startswith("s3://") else DEFAULT_END_DELAY_LOCAL
            end_delay = _env_number(TRAINING_END_DELAY_REFRESH_ENV, default)
        window = int(_env_number(INCOMPLETE_STEP_WAIT_WINDOW_ENV, DEFAULT_INCOMPLETE_STEP_WAIT_WINDOW))
        return cls(
            poll_interval=max(0.0, poll_interval),
            end_delay=max(0.0, end_delay),
            missing_event_timeout=(
                DEFAULT_MISSING_EVENT_TIMEOUT if missing_event_timeout is None else missing_event_timeout
            ),
            no_marker_timeout=no_marker_timeout,
            incomplete_step_window=max(1, window),
        )


@dataclass
class LoadedCollections:
    """The first readable collections file's collections, and every worker that wrote one."""

    collections: dict[str, Collection]
    num_workers: int
    workers: set[str]
    #: The end-marker answer sent with the open's first requests (remote stores), for the first
    #: refresh only; None: ask the store.
    ended_at_open: Callable[[], bool] | None = None


class OpeningPrefetch:
    """On a remote store, the requests every open makes, sent together instead of one by one.

    Opening a finished trial asks: which collections files exist (LIST), the first one (GET), and
    whether training has ended (HEAD), before listing the index files. Each is a round trip
    (20-50 ms on AWS S3). The GET of ``worker_0``'s collections file (the usual first one) and the
    HEAD are sent at once with the LIST. The HEAD still completes before the index listing
    starts, so "ended" still means the listing that follows is complete.
    """

    def __init__(self, store: ObjectStore) -> None:
        self._pool = ThreadPoolExecutor(2, thread_name_prefix="murphy-trial-open")
        self.first_key = collections_file_key(DEFAULT_WORKER_NAME)
        self._first: Future[bytes | None] = self._pool.submit(_get_or_none, store, self.first_key)
        self._ended: Future[bool] | None = self._pool.submit(store.exists, END_OF_TRAINING_KEY)
        self._pool.shutdown(wait=False)

    @classmethod
    def start(cls, store: ObjectStore) -> OpeningPrefetch | None:
        """A prefetch for remote stores; None for a local directory or memory (no round trips)."""
        return None if isinstance(store, (LocalObjectStore, InMemoryObjectStore)) else cls(store)

    def first_collections(self) -> bytes | None:
        return self._first.result()

    def take_ended(self) -> Callable[[], bool] | None:
        """The prefetched end-marker answer, once (later refreshes ask the store again)."""
        fut, self._ended = self._ended, None
        return None if fut is None else fut.result


def _get_or_none(store: ObjectStore, key: str) -> bytes | None:
    try:
        return store.get(key)
    except ObjectNotFound:
        return None
    except Exception:  # the real read, made again without prefetching, reports the error
        return None


def _collection_keys(store: ObjectStore) -> list[str]:
    try:
        return [k for k in store.list(COLLECTIONS_PREFIX) if k.endswith("collections.json")]
    except ObjectNotFound as exc:  # a listing finds no object only when the bucket is missing
        raise MissingCollectionFiles(f"cannot list {store.uri}: the bucket does not exist ({exc})") from exc


def _first_doc(store: ObjectStore, keys: list[str], prefetch: OpeningPrefetch | None = None) -> CollectionsDoc | None:
    errors: list[str] = []
    for i, key in enumerate(keys):
        try:
            if i == 0 and prefetch is not None and key == prefetch.first_key:
                data = prefetch.first_collections()
                if data is not None:
                    return CollectionsDoc.from_json_bytes(data)
            return CollectionsDoc.from_json_bytes(store.get(key))
        except ObjectNotFound:
            continue
        except CorruptCollections as exc:
            errors.append(f"{key}: {exc}")
    if errors:
        raise CorruptCollections("no readable collections file: " + "; ".join(errors))
    return None


def smdebug_index_token(store: ObjectStore, path: str, token: str | None) -> str | None:
    """A store-relative index token as smdebug spells ``last_index_token``: joined with the
    trial directory for a local trial, with the key prefix (no bucket) for S3."""
    if token is None:
        return None
    if isinstance(store, LocalObjectStore):
        base = path if "://" not in path else str(store.root)
        return os.path.join(base, token)
    prefix = getattr(store, "prefix", "")
    return f"{prefix}/{token}" if isinstance(prefix, str) and prefix else token


def impossible_path(store: ObjectStore) -> str | None:
    """Why no training job can ever write collections under ``store`` (None if one can).

    A local trial directory below a regular file can never be created; waiting for it (smdebug
    waits forever) only hides a typo."""
    if not isinstance(store, LocalObjectStore):
        return None
    here = store.root
    while True:
        if here.exists():
            return None if here.is_dir() else f"{here} is a file, not a directory"
        if here.parent == here:
            return None
        here = here.parent


def load_collections(
    store: ObjectStore, settings: ReaderSettings, prefetch: OpeningPrefetch | None = None
) -> LoadedCollections:
    """Wait for the collections files like smdebug (first one, then ``num_workers`` of them).

    Polls every ``poll_interval``. Raises :class:`MissingCollectionFiles` when the end-of-training
    marker shows up first, or when ``no_marker_timeout`` passes without a file.
    """
    started = time.monotonic()
    doc: CollectionsDoc | None = None
    warned = False
    while True:
        keys = _collection_keys(store)
        if not keys:
            why = impossible_path(store)
            if why is not None:
                raise MissingCollectionFiles(f"no training job can write to {store.uri}: {why}")
        if doc is None and keys:
            doc = _first_doc(store, keys, prefetch)
        if doc is not None and len(keys) >= doc.num_workers:
            break
        ended = store.exists(END_OF_TRAINING_KEY)
        if ended and doc is not None:
            log.warning("training ended with %d of %d collections files", len(keys), doc.num_workers)
            break
        if ended:
            raise MissingCollectionFiles(f"Training has ended and no collection files were found under {store.uri}")
        waited = time.monotonic() - started
        if settings.no_marker_timeout is not None and waited >= settings.no_marker_timeout:
            raise MissingCollectionFiles(
                f"no collections files under {store.uri} after {waited:.1f} s (no_marker_timeout)"
            )
        if not warned and waited > 10:
            log.warning("waiting for collections files under %s; is the trial path right?", store.uri)
            warned = True
        time.sleep(max(settings.poll_interval, 0.001))
    workers = {w for w in (worker_from_collections_key(k) for k in keys) if w is not None}
    first_ended = prefetch.take_ended() if prefetch is not None else None
    return LoadedCollections(doc.collections, doc.num_workers, workers, first_ended)
