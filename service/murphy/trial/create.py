"""``create_trial`` and smdebug's refresh context managers."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar
from urllib.parse import urlparse

from murphy.exceptions import SMDebugValueError
from murphy.storage import open_store
from murphy.storage.base import ObjectStore
from murphy.trial.opening import ReaderSettings
from murphy.trial.trial import Trial

log = logging.getLogger(__name__)


def _default_name(path: str) -> str:
    parsed = urlparse(path)
    tail = (parsed.path if "://" in path else path).rstrip("/")
    return os.path.basename(tail) or parsed.netloc or path


def _check_range(range_steps: tuple[int | None, int | None] | None) -> None:
    if range_steps is None:
        return
    begin, end = range_steps
    for v in (begin, end):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise SMDebugValueError(f"range_steps must hold non-negative ints or None, got {range_steps!r}")
    if begin is not None and end is not None and end <= begin:
        raise SMDebugValueError("range_steps should be of the form (begin, end) where begin is less than end")


def create_trial(
    path: str | os.PathLike[str] | ObjectStore,
    name: str | None = None,
    profiler: bool = False,
    output_dir: str | None = None,
    range_steps: tuple[int | None, int | None] | None = None,
    check: bool = False,
    index_mode: bool = True,
    cache: bool = False,
    *,
    parallel: bool = True,
    poll_interval: float = 0.1,
    end_delay: float | None = None,
    missing_event_timeout: float | None = None,
    no_marker_timeout: float | None = None,
) -> Trial:
    """Open the tensors of a training job, like ``smdebug.trials.create_trial``.

    ``path`` is a local path, ``file://``, ``s3://bucket/prefix``, ``memory://name`` or an
    :class:`ObjectStore`. The positional order is smdebug's; ``profiler`` and ``output_dir``
    are accepted and ignored (profiler data is out of scope), ``parallel`` (smdebug's trial
    keyword) is accepted and ignored, ``check`` is ignored (both footer
    kinds are always accepted), ``index_mode=False`` is not supported (index files are the only
    discovery path) and logs a warning. Surrounding whitespace is stripped and ``~`` expanded, as
    smdebug does. Blocks until the collections files exist, like smdebug, but at most
    ``no_marker_timeout`` seconds when that is given, and not at all for a local path that can
    never exist (below a regular file): that raises ``MissingCollectionFiles`` at once.

    Murphy-only keywords: ``poll_interval`` (seconds between listings, default 0.1; smdebug: 2),
    ``end_delay`` (pause before the final refresh after the end marker; default 0.1 s, 1 s for
    S3, env ``SMDEBUG_TRAINING_END_DELAY_REFRESH``), ``missing_event_timeout`` (how long an index
    may point at a missing events file, default 60 s), ``no_marker_timeout`` (give up waiting
    when no new data and no end marker arrive for this long; default None = wait forever).
    """
    _check_range(range_steps)
    if not index_mode:
        log.warning("index_mode=False is not supported; reading from index files")
    if not isinstance(path, ObjectStore):
        path = _clean_path(path)
    store = open_store(path)  # type: ignore[arg-type]  # open_store passes ObjectStores through
    shown_path = store.uri if isinstance(path, ObjectStore) else os.fspath(path)
    settings = ReaderSettings.resolve(
        store.uri,
        poll_interval=poll_interval,
        end_delay=end_delay,
        missing_event_timeout=missing_event_timeout,
        no_marker_timeout=no_marker_timeout,
    )
    return Trial(
        store,
        name=name if name is not None else _default_name(shown_path),
        path=shown_path,
        settings=settings,
        range_steps=range_steps,
        check=check,
        index_mode=True,
        cache=cache,
    )


def _clean_path(path: str | os.PathLike[str]) -> str:
    """smdebug's cleaning: surrounding whitespace stripped, ``~`` expanded for local paths."""
    cleaned = os.fspath(path).strip()
    if not cleaned:
        raise SMDebugValueError(f"create_trial needs a trial path, got {os.fspath(path)!r}")
    if "://" not in cleaned:
        cleaned = os.path.expanduser(cleaned)
    return cleaned


_Trials = TypeVar("_Trials", bound="Trial | Iterable[Trial]")


def _as_list(trials: Trial | Iterable[Trial]) -> list[Trial]:
    return [trials] if isinstance(trials, Trial) else list(trials)


@contextmanager
def _refreshing(trials: _Trials, on: bool) -> Iterator[_Trials]:
    ts = _as_list(trials)
    before = [getattr(t, "dynamic_refresh", True) for t in ts]
    for t in ts:
        t.dynamic_refresh = on
    try:
        yield trials
    finally:
        for t, b in zip(ts, before, strict=True):
            t.dynamic_refresh = b


def no_refresh(trials: _Trials) -> contextlib.AbstractContextManager[_Trials]:
    """Freeze the trials' view (``dynamic_refresh=False``) inside the block, as smdebug's
    ``smdebug.analysis.utils.no_refresh``, and yield what was passed (``with no_refresh([t]) as
    [t]:``). Afterwards each trial gets back its previous setting (smdebug sets True)."""
    return _refreshing(trials, False)


def refresh(trials: _Trials) -> contextlib.AbstractContextManager[_Trials]:
    """The opposite of :func:`no_refresh`: refreshing on inside the block; yields the trials."""
    return _refreshing(trials, True)
