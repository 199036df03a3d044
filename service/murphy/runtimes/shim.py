"""``python -m murphy.runtimes.shim --log FILE --exit FILE -- argv...``: one container's keeper.

Like ``containerd-shim``: it starts ``argv`` (in its own process group, which the runtime made
the container's), appends every line of the child's merged stdout+stderr to ``--log`` as JSON
(``{"t": epoch_ms, "m": line}``, flushed per line), and when the child ends writes ``--exit``
atomically (``{"exit_code": n | null, "signal": s | null, "ended_at": epoch_s}``) and exits with
the child's code (128 + N for a signal). SIGTERM / SIGINT do not stop the shim: the runtime
signals the whole process group, so the child gets them directly and the shim keeps collecting
its output until it ends. Like a container whose init process ended, processes the child left
behind in the session are killed once it has exited. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO

#: Longer lines are split (CloudWatch Logs' event limit is 256 KiB).
MAX_LINE = 256 * 1024
#: How long to wait for the end of the output once the child has exited (only a process that
#: left the session can hold the pipe open that long).
DRAIN_S = 5.0


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogWriter:
    """Appends JSON lines with one ``write`` each (O_APPEND), so readers see whole lines."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def line(self, message: str, t_ms: int | None = None) -> None:
        doc = {"t": _now_ms() if t_ms is None else t_ms, "m": message}
        os.write(self._fd, (json.dumps(doc, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass"))

    def close(self) -> None:
        os.close(self._fd)


def pump(stream: IO[bytes], log: LogWriter) -> None:
    """Copy ``stream`` to ``log`` line by line (a last line without newline included)."""
    while True:
        raw = stream.readline(MAX_LINE)
        if not raw:
            return
        if raw.endswith(b"\n"):
            raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
        log.line(raw.decode("utf-8", errors="replace"))


def write_exit(path: str, exit_code: int | None, sig: int | None) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"exit_code": exit_code, "signal": sig, "ended_at": time.time()}, f)
    os.replace(tmp, path)


def _session_leftovers() -> list[int]:
    """Processes of this session other than the shim (Linux ``/proc``)."""
    me = os.getpid()
    sid = os.getsid(0)
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is the state (field 3); the session is field 6.
        if int(fields[3]) == sid and fields[0] != b"Z":
            out.append(int(name))
    return out


def _kill_leftovers() -> None:
    if os.getsid(0) != os.getpid():
        return  # not started as its own session (the runtime always does): nothing is ours
    for pid in _session_leftovers():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _parse(argv: Sequence[str]) -> tuple[str, str, list[str]]:
    usage = "usage: python -m murphy.runtimes.shim --log FILE --exit FILE -- argv..."
    if "--" not in argv:
        raise SystemExit(usage)
    split = list(argv).index("--")
    opts, command = list(argv[:split]), list(argv[split + 1:])
    values: dict[str, str] = {}
    while opts:
        key = opts.pop(0)
        if key not in ("--log", "--exit") or not opts:
            raise SystemExit(usage)
        values[key] = opts.pop(0)
    if set(values) != {"--log", "--exit"} or not command:
        raise SystemExit(usage)
    return values["--log"], values["--exit"], command


def main(argv: Sequence[str] | None = None) -> int:
    log_path, exit_path, command = _parse(sys.argv[1:] if argv is None else argv)
    # A handler rather than SIG_IGN: handlers are reset on exec, so the child gets the default.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: None)
    log = LogWriter(log_path)
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as e:
        log.line(f"murphy-shim: cannot start {command[0]!r}: {e}")
        write_exit(exit_path, 127, None)
        return 127
    assert child.stdout is not None
    reader = threading.Thread(target=pump, args=(child.stdout, log), daemon=True)
    reader.start()
    rc = child.wait()
    # As when a container's init process ends: whatever it left behind goes too. What they
    # wrote before is still in the pipe and is read to the end.
    _kill_leftovers()
    reader.join(DRAIN_S)
    if rc < 0:
        write_exit(exit_path, None, -rc)
        code = 128 - rc
    else:
        write_exit(exit_path, rc, None)
        code = rc
    log.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
