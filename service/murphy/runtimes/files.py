"""What a runtime reads back from a container's directory on the service's host: the toolkit's
stage file, ``/opt/ml/output/failure``, small JSON records; and how it names a signal."""

from __future__ import annotations

import contextlib
import fcntl
import json
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

_FAILURE_BYTES = 64 * 1024


def read_json(path: str) -> Any:
    """The file's JSON, or None when it is missing or not (yet) whole."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


def stage(d: Mapping[str, Any]) -> str | None:
    """The SageMaker phase the training toolkit reported (``d["stage"]`` is its file)."""
    doc = read_json(d["stage"])
    return doc.get("stage") if isinstance(doc, dict) else None


def failure(d: Mapping[str, Any]) -> str | None:
    """The first 64 KiB of the training container's failure file, if it wrote one."""
    path = d.get("failure")
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            text = f.read(_FAILURE_BYTES).decode("utf-8", errors="replace").strip()
    except (FileNotFoundError, PermissionError):
        return None
    return text or None


def signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


@contextlib.contextmanager
def exclusive(container_dir: Path) -> Iterator[None]:
    """One launch at a time per container directory, across threads and processes."""
    with open(container_dir / ".launch.lock", "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
