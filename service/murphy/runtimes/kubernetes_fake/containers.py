"""One container of a pod as the fake kubelet runs it: a local process started through
:mod:`.sandbox`, its log (:class:`.logs.LogBuffer`), and its status as the API shows it
(``waiting`` with a reason, ``running`` with ``startedAt``, ``terminated`` with exit code,
reason and the termination message)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from murphy.runtimes.kubernetes_fake.logs import LogBuffer
from murphy.runtimes.kubernetes_fake.store import now_iso

#: The kubelet's limits on a termination message (per container) and on the log fallback.
MAX_MESSAGE = 4096
FALLBACK_LINES, FALLBACK_BYTES = 80, 2048


class ContainerRun:
    def __init__(self, spec: dict[str, Any], init: bool, pod_dir: str) -> None:
        self.spec, self.name, self.init = spec, spec["name"], init
        #: A native sidecar (KEP-753): an init container with ``restartPolicy: Always``.
        self.sidecar = init and spec.get("restartPolicy") == "Always"
        self.dir = os.path.join(pod_dir, "containers", self.name)
        os.makedirs(self.dir, exist_ok=True)
        self.term_file = os.path.join(self.dir, "termination-log")
        open(self.term_file, "wb").close()
        os.chmod(self.term_file, 0o666)
        self.waiting: tuple[str, str] = ("ContainerCreating", "")
        self.proc: subprocess.Popen[bytes] | None = None
        self.buffer: LogBuffer | None = None
        self.started_at = self.finished_at = ""
        self.started_mono = 0.0
        self.exit_code: int | None = None
        self.reason = self.message = ""
        self.kill_reason = ""
        self.container_id = ""
        self.image_id = ""
        self.pull_failures = 0
        self.next_attempt = 0.0
        self.never_started = False  # the pod ended before this container could start
        self._readers: list[threading.Thread] = []

    # --- lifecycle -------------------------------------------------------------------------
    def start(self, sandbox_spec: dict[str, Any], python: str, on_output: Callable[[bool], None]) -> None:
        spec_path = os.path.join(self.dir, "sandbox.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(sandbox_spec, f)
        self.buffer = LogBuffer()
        self.proc = subprocess.Popen([python, "-m", "murphy.runtimes.kubernetes_fake.sandbox", spec_path],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True, close_fds=True)
        self.container_id = "containerd://" + secrets.token_hex(32)
        self.started_at, self.started_mono = now_iso(), time.monotonic()
        for stream, pipe in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)):
            t = threading.Thread(target=self._read, args=(stream, pipe, on_output), daemon=True,
                                 name=f"log-{self.name}-{stream}")
            t.start()
            self._readers.append(t)

    def _read(self, stream: str, pipe: IO[bytes] | None, on_output: Callable[[bool], None]) -> None:
        assert pipe is not None and self.buffer is not None
        for line in iter(pipe.readline, b""):
            self.buffer.append(stream, line)
            on_output(False)
        pipe.close()
        on_output(True)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.exit_code is None

    def poll(self) -> bool:
        """True when the process has just been seen to exit (its status is then final)."""
        if self.proc is None or self.exit_code is not None:
            return False
        rc = self.proc.poll()
        if rc is None:
            return False
        for t in self._readers:
            t.join(timeout=2)
        assert self.buffer is not None
        self.buffer.close()
        self.exit_code = rc if rc >= 0 else 128 - rc
        self.finished_at = now_iso()
        self.reason = self.kill_reason or ("Completed" if self.exit_code == 0 else "Error")
        self.message = self._termination_message()
        return True

    def _termination_message(self) -> str:
        try:
            with open(self.term_file, "rb") as f:
                text = f.read(MAX_MESSAGE).decode("utf-8", "replace")
        except OSError:
            text = ""
        if not text.strip() and self.exit_code and self.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            assert self.buffer is not None
            tail = "".join(self.buffer.text().splitlines(keepends=True)[-FALLBACK_LINES:])
            text = tail.encode()[-FALLBACK_BYTES:].decode("utf-8", "replace")
        return text

    def signal(self, sig: int, group: bool = False) -> None:
        if self.proc is None or self.exit_code is not None:
            return
        try:
            if group:
                os.killpg(self.proc.pid, sig)
            else:
                self.proc.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self, reason: str = "") -> None:
        if reason:
            self.kill_reason = reason
        self.signal(signal.SIGKILL, group=True)

    # --- status ------------------------------------------------------------------------------
    def status(self, image: str) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "image": image, "imageID": self.image_id, "restartCount": 0,
                               "ready": False, "started": False, "lastState": {}}
        if self.exit_code is not None:
            term: dict[str, Any] = {"exitCode": self.exit_code, "reason": self.reason, "startedAt": self.started_at,
                                    "finishedAt": self.finished_at, "containerID": self.container_id}
            if self.message:
                term["message"] = self.message
            out["state"] = {"terminated": term}
            out["containerID"] = self.container_id
        elif self.proc is not None:
            out["state"] = {"running": {"startedAt": self.started_at}}
            out.update(ready=not self.init or self.sidecar, started=True, containerID=self.container_id)
        elif self.never_started:
            out["state"] = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                                           "message": "The container could not be located when the pod was terminated",
                                           "startedAt": None, "finishedAt": None}}
        else:
            waiting: dict[str, Any] = {"reason": self.waiting[0]}
            if self.waiting[1]:
                waiting["message"] = self.waiting[1]
            out["state"] = {"waiting": waiting}
        return out


def python_for_sandbox() -> str:
    return sys.executable
