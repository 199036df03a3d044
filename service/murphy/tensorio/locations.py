"""Where things live under a trial root, and how names are built and parsed.

All keys are relative to the trial root (the hook's ``out_dir``)::

    collections/000000000/<worker>_collections.json
    events/<S:012d>/<S:012d>_<worker>.tfevents
    index/<S//1000:09d>/<S:012d>_<worker>.json
    training_job_end.ts

Zero padding makes lexical key order equal step order, which is what incremental listing
(``list(prefix, start_after=...)``) relies on.
"""

from __future__ import annotations

import re

from murphy.core.reduction_config import ALLOWED_NORMS, ALLOWED_REDUCTIONS
from murphy.exceptions import SMDebugValueError

EVENTS_PREFIX = "events/"
INDEX_PREFIX = "index/"
COLLECTIONS_PREFIX = "collections/000000000/"
COLLECTIONS_SUFFIX = "_collections.json"
END_OF_TRAINING_KEY = "training_job_end.ts"
DEFAULT_WORKER_NAME = "worker_0"
STEPS_PER_INDEX_DIR = 1000
REDUCTIONS_PREFIX = "smdebug/reductions/"

_INDEX_RE = re.compile(r"(?:^|/)index/\d+/(\d+)_(.+)\.json$")
_EVENT_RE = re.compile(r"(?:^|/)events/\d+/(\d+)_(.+)\.tfevents$")
_COLLECTIONS_RE = re.compile(r"(?:^|/)collections/\d+/(.+)_collections\.json$")
_TF_OUTPUT_SUFFIX = re.compile(r":\d+$")
_REDUCTION_OPS = frozenset(ALLOWED_REDUCTIONS) | frozenset(ALLOWED_NORMS)


def escape_worker(worker: str) -> str:
    """A TF device name as smdebug puts it in file names: ``/`` → ``_``, ``:`` → ``-``.

    Ordinary worker names (``worker_0``) are unchanged; escaping is idempotent.
    """
    return worker.replace("/", "_").replace(":", "-")


def unescape_worker(name: str) -> str:
    """Inverse of :func:`escape_worker` for serialized device names (those starting with ``_``)."""
    if name.startswith("_"):
        return name.replace("_", "/").replace("-", ":")
    return name


def _check_step(step: int) -> int:
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise SMDebugValueError(f"step must be a non-negative integer, got {step!r}")
    return step


def event_file_key(step: int, worker: str = DEFAULT_WORKER_NAME) -> str:
    """``events/000000001234/000000001234_worker_0.tfevents``."""
    s = _check_step(step)
    return f"{EVENTS_PREFIX}{s:012d}/{s:012d}_{escape_worker(worker)}.tfevents"


def index_dir_key(step: int) -> str:
    """``index/000000001/`` for step 1234: the directory holding that step's index files."""
    return f"{INDEX_PREFIX}{_check_step(step) // STEPS_PER_INDEX_DIR:09d}/"


def index_file_key(step: int, worker: str = DEFAULT_WORKER_NAME) -> str:
    """``index/000000001/000000001234_worker_0.json``."""
    return f"{index_dir_key(step)}{step:012d}_{escape_worker(worker)}.json"


def collections_file_key(worker: str = DEFAULT_WORKER_NAME) -> str:
    """``collections/000000000/worker_0_collections.json``."""
    return f"{COLLECTIONS_PREFIX}{escape_worker(worker)}{COLLECTIONS_SUFFIX}"


def parse_index_key(key: str) -> tuple[int, str] | None:
    """``(step, worker)`` of an index key, or None for keys that are not index files."""
    m = _INDEX_RE.search(key)
    if m is None:
        return None
    return int(m.group(1)), unescape_worker(m.group(2))


def parse_event_key(key: str) -> tuple[int, str] | None:
    """``(step, worker)`` of an events key, or None for keys that are not event files."""
    m = _EVENT_RE.search(key)
    if m is None:
        return None
    return int(m.group(1)), unescape_worker(m.group(2))


def worker_from_collections_key(key: str) -> str | None:
    """The worker that wrote a collections file, or None for other keys."""
    m = _COLLECTIONS_RE.search(key)
    if m is None:
        return None
    return unescape_worker(m.group(1))


def strip_output_index(name: str) -> str:
    """Drop a TF-style ``:<digits>`` suffix (non-TF hooks name reductions without it)."""
    return _TF_OUTPUT_SUFFIX.sub("", name)


def reduction_tensor_name(base: str, op: str, abs_: bool = False) -> str:
    """``smdebug/reductions/[abs_]<op>/<base>``; ``op`` is a reduction or ``l1``/``l2``."""
    return f"{REDUCTIONS_PREFIX}{'abs_' if abs_ else ''}{op}/{base}"


def parse_reduction_name(name: str) -> tuple[str, str, bool] | None:
    """``(base, op, abs_)`` of a reduction tensor name, or None for other names."""
    if not name.startswith(REDUCTIONS_PREFIX):
        return None
    op, sep, base = name[len(REDUCTIONS_PREFIX):].partition("/")
    if not sep or not base:
        return None
    is_abs = op.startswith("abs_")
    if is_abs:
        op = op[4:]
    if op not in _REDUCTION_OPS:
        return None
    return base, op, is_abs
