"""Copying a container's log out of the Docker engine into murphy's log file.

The engine forgets a container's log when the container is removed, and its API pages only by
time, so the runtime keeps its own copy (:mod:`murphy.runtimes.logfile`) and asks the engine only
for what came after the last line it copied. Lines carry the engine's nanosecond timestamps; the
state file remembers the last timestamp and how many lines with exactly that timestamp were
already copied, so nothing is lost or doubled when several lines share one.
"""

from __future__ import annotations

import calendar
import json
import os
import re
from typing import Any

from murphy.runtimes import logfile

_TS = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")


def rfc3339_ns(ts: str) -> int:
    """``2026-11-30T03:40:01.12345Z`` → nanoseconds since the epoch (Docker trims zeros, so the
    strings do not compare as text)."""
    m = _TS.fullmatch(ts.strip())
    if m is None:
        raise ValueError(f"not an RFC 3339 timestamp: {ts!r}")
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    frac = int((m.group(7) or "0").ljust(9, "0"))
    secs = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    tz = m.group(8)
    if tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        secs -= sign * (int(tz[1:3]) * 3600 + int(tz[4:6]) * 60)
    return secs * 1_000_000_000 + frac


def _state(path: str) -> tuple[int, int]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        return int(doc["ns"]), int(doc["n"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return 0, 0


def sync_logs(api: Any, container_id: str, log_path: str, state_path: str) -> int:
    """Append the container's new log lines to ``log_path``; return how many were added."""
    last_ns, same = _state(state_path)
    # The engine's ``since`` is in seconds and inclusive; start a millisecond early and drop
    # what was already copied, by exact timestamp.
    since = max(last_ns / 1e9 - 0.001, 0.0)
    raw: bytes = api.logs(container_id, stdout=True, stderr=True, timestamps=True,
                          **({"since": since} if since > 0 else {}))
    parsed: list[tuple[int, str]] = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        ts, _, text = line.partition(" ")
        try:
            parsed.append((rfc3339_ns(ts), text))
        except ValueError:
            continue
    added: list[tuple[int, str]] = []
    skip = same
    for ns, text in parsed:
        if ns < last_ns:
            continue
        if ns == last_ns and skip > 0:
            skip -= 1
            continue
        added.append((ns, text))
    if not added:
        return 0
    logfile.append(log_path, [(ns // 1_000_000, text) for ns, text in added])
    newest = added[-1][0]
    count = sum(1 for ns, _ in parsed if ns == newest)
    tmp = f"{state_path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"ns": newest, "n": count}, f)
    os.replace(tmp, state_path)
    return len(added)
