"""A container's log as the kubelet keeps it: timestamped lines, read by ``pods/{name}/log``
with the API's options (``timestamps``, ``sinceSeconds``, ``sinceTime``, ``tailLines``,
``limitBytes``, ``follow``), kept after the container exits until its pod is deleted."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from murphy.runtimes.kubernetes_fake.errors import bad_request


def rfc3339nano(ns: int) -> str:
    secs, frac = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(secs, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def parse_time(text: str) -> int:
    """RFC 3339 (optionally with fractional seconds) to epoch nanoseconds."""
    main, _, frac = text.rstrip("Z").partition(".")
    try:
        base = datetime.fromisoformat(main).replace(tzinfo=timezone.utc) if "+" not in main else datetime.fromisoformat(main)
    except ValueError as e:
        raise bad_request(f'parsing time "{text}" as RFC3339: cannot parse') from e
    digits = "".join(ch for ch in frac if ch.isdigit())[:9].ljust(9, "0") if frac else "0"
    return int(base.timestamp()) * 1_000_000_000 + int(digits)


@dataclass(frozen=True)
class LogOptions:
    timestamps: bool
    since_ns: int | None
    tail: int | None
    limit: int | None


class LogBuffer:
    def __init__(self) -> None:
        self._lines: list[tuple[int, str, bytes]] = []  # (epoch ns, stream, line with its newline)
        self._lock = threading.Lock()
        self.closed = False
        #: Bumped by :meth:`rotate`: follow streams opened before end, as after a kubelet log
        #: rotation (``kubectl logs -f`` goes silent, kubernetes/kubernetes#115701).
        self.rotations = 0

    def append(self, stream: str, line: bytes) -> None:
        if not line.endswith(b"\n"):
            line += b"\n"
        with self._lock:
            ts = time.time_ns()
            if self._lines and ts <= self._lines[-1][0]:
                ts = self._lines[-1][0] + 1  # strictly increasing: resuming from a timestamp is exact
            self._lines.append((ts, stream, line))

    def close(self) -> None:
        self.closed = True

    def rotate(self) -> None:
        self.rotations += 1

    def text(self) -> str:
        with self._lock:
            return b"".join(line for _, _, line in self._lines).decode("utf-8", "replace")

    @staticmethod
    def options(timestamps: bool, since_seconds: str | None, since_time: str | None, tail_lines: str | None,
                limit_bytes: str | None) -> LogOptions:
        since: int | None = None
        try:
            if since_seconds:
                since = time.time_ns() - int(since_seconds) * 1_000_000_000
            if since_time:
                since = parse_time(since_time)
            tail = int(tail_lines) if tail_lines else None
            limit = int(limit_bytes) if limit_bytes else None
        except ValueError as e:
            raise bad_request(f"invalid log options: {e}") from e
        return LogOptions(timestamps, since, tail, limit)

    def read(self, opts: LogOptions, pos: int | None = None) -> tuple[list[bytes], int, bool]:
        """``(chunks, next position, finished)``; ``pos`` None starts per the options."""
        with self._lock:
            closed = self.closed
            if pos is None:
                idx = [i for i, (ts, _, _) in enumerate(self._lines) if opts.since_ns is None or ts >= opts.since_ns]
                if opts.tail is not None:
                    idx = idx[len(idx) - opts.tail:] if opts.tail > 0 else []
                start = idx[0] if idx else len(self._lines)
            else:
                start = pos
            chunk = self._lines[start:]
            end = len(self._lines)
        out: list[bytes] = []
        for ts, _, line in chunk:
            out.append(rfc3339nano(ts).encode() + b" " + line if opts.timestamps else line)
        if opts.limit is not None:
            total, limited = 0, []
            for c in out:
                if total + len(c) > opts.limit:
                    limited.append(c[: opts.limit - total])
                    return limited, end, True
                total += len(c)
                limited.append(c)
            out = limited
        return out, end, closed
