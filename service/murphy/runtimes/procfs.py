"""Just enough of Linux ``/proc`` to recognise a process again after a restart.

A pid alone is not an identity (pids are reused); ``(pid, start time)`` is: the start time in
clock ticks since boot (``/proc/<pid>/stat`` field 22) never changes for a process and differs
for any later process that gets the same pid.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str
    pgid: int
    sid: int
    start_time: int


def stat(pid: int) -> ProcStat | None:
    """``/proc/<pid>/stat``, or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) is in parentheses and may contain anything, ")" included.
    fields = raw.rsplit(b")", 1)[1].split()
    return ProcStat(pid, fields[0].decode(), int(fields[2]), int(fields[3]), int(fields[19]))


def start_time(pid: int) -> int | None:
    st = stat(pid)
    return None if st is None else st.start_time


def alive(pid: int, started: int) -> bool:
    """True if the process ``(pid, started)`` still exists and is not a zombie."""
    st = stat(pid)
    return st is not None and st.start_time == started and st.state not in ("Z", "X")


def has_env(pid: int, entry: str) -> bool:
    """True if ``NAME=value`` is in the process's initial environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return entry.encode() in f.read().split(b"\0")
    except OSError:
        return False


def _parse_env(items: list[bytes]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition(b"=")
        if sep:
            out[name.decode(errors="replace")] = value.decode(errors="replace")
    return out


def marked(entry: str) -> list[tuple[ProcStat, dict[str, str]]]:
    """Every live process whose initial environment holds ``entry`` (``NAME=value``), with
    that environment. One pass over ``/proc`` (about 2 ms for 100 processes)."""
    needle = entry.encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        if needle not in raw:  # the cheap test first: most processes are not ours
            continue
        items = raw.split(b"\0")
        st = stat(int(name))
        if needle in items and st is not None and st.state not in ("Z", "X"):
            out.append((st, _parse_env(items)))
    return out


def session_members(sid: int, not_before: int, marker: str) -> list[ProcStat]:
    """Live processes of session ``sid``, started at or after ``not_before``, whose environment
    holds ``marker`` (``NAME=value``): a session id reused by an unrelated process after the
    container's processes are gone never matches."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = stat(int(name))
        if (st is not None and st.sid == sid and st.start_time >= not_before
                and st.state not in ("Z", "X") and has_env(st.pid, marker)):
            out.append(st)
    return out
