"""A container's log as a file of JSON lines ``{"t": epoch_ms, "m": line}``.

The process runtime's shim writes it as the program prints; the Docker runtime copies the
engine's log into it (the engine's copy goes away with the container). Readers page through it
by byte offset, which is the cursor of :class:`~murphy.runtimes.base.LogPage`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable

from murphy.runtimes.base import LogEvent, LogPage

TAIL_LINES = 20
_TAIL_BYTES = 64 * 1024
_READ_LIMIT = 8 << 20


def append(path: str, lines: Iterable[tuple[int, str]]) -> None:
    """Append ``(epoch_ms, text)`` lines in one write (a reader never sees half a batch line)."""
    data = "".join(json.dumps({"t": t, "m": m}) + "\n" for t, m in lines)
    if data:
        with open(path, "a", encoding="utf-8") as f:
            f.write(data)


def read_page(path: str, cursor: int = 0, limit: int = 10_000) -> LogPage:
    try:
        with open(path, "rb") as f:
            f.seek(cursor)
            raw = f.read(_READ_LIMIT)
    except FileNotFoundError:
        return LogPage([], cursor)
    events: list[LogEvent] = []
    pos = cursor
    start = 0
    while len(events) < limit:
        nl = raw.find(b"\n", start)
        if nl < 0:
            break  # a partial last line: it is read again, whole, next time
        line = raw[start:nl]
        start = nl + 1
        pos = cursor + start
        try:
            doc = json.loads(line)
            t = int(doc["t"])
            events.append(LogEvent(timestamp_ms=t, message=str(doc["m"]), ingestion_ms=t))
        except (ValueError, KeyError, TypeError):
            continue
    return LogPage(events, pos)


def tail(path: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` messages, joined by newlines."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - _TAIL_BYTES))
            raw = f.read()
    except FileNotFoundError:
        return ""
    out = []
    for line in raw.split(b"\n")[-(lines + 1):]:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            out.append(str(json.loads(line)["m"]))
    return "\n".join(out[-lines:])
