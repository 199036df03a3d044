"""Following a pod container's log into murphy's log store (the kubelet forgets it with the pod).

One thread per followed ``(pod, container)`` reads ``GET .../pods/<pod>/log?follow=true&
timestamps=true`` and appends each line to the container's log file
(:mod:`murphy.runtimes.logfile`'s JSON lines, with the kubelet's nanosecond timestamp kept as
``ns``). A follow stream ends when the container ends, and also on a log rotation or an API
server restart; the follower then reconnects with ``sinceTime`` = the last line's time (whole
seconds: the API takes RFC 3339 seconds) and drops what it already has: every line older than
the last one kept, and as many lines carrying exactly the last timestamp as were kept. Where it
got to is read back from the log file itself, so a restarted murphy resumes without a state file
that could disagree with the log.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from murphy.runtimes.docker_logs import rfc3339_ns
from murphy.runtimes.kubernetes_client import KubeApi, KubernetesError, KubernetesNotFound

log = logging.getLogger(__name__)
_TAIL_BYTES = 256 * 1024


@dataclass
class Position:
    """The newest timestamp in a log file and how many lines carry exactly it."""

    ns: int = 0
    same: int = 0


def position(path: str) -> Position:
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - _TAIL_BYTES))
            raw = f.read()
    except FileNotFoundError:
        return Position()
    pos = Position()
    for line in raw.split(b"\n"):
        try:
            ns = int(json.loads(line)["ns"])
        except (ValueError, KeyError, TypeError):
            continue
        if ns > pos.ns:
            pos = Position(ns, 1)
        elif ns == pos.ns:
            pos.same += 1
    return pos


def since_time(pos: Position) -> str | None:
    if pos.ns <= 0:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(pos.ns // 1_000_000_000))


def fresh_lines(lines: Iterable[str], pos: Position) -> Iterable[tuple[int, str]]:
    """``(ns, text)`` of the timestamped ``lines`` that come after ``pos`` (which advances)."""
    skip = pos.same
    start = pos.ns
    for raw in lines:
        line = raw.rstrip("\n")
        ts, _, text = line.partition(" ")
        try:
            ns = rfc3339_ns(ts)
        except ValueError:
            continue  # not a timestamped line (an API warning in the stream)
        if ns < start:
            continue
        if ns == start and skip > 0:
            skip -= 1
            continue
        if ns > pos.ns:
            pos.ns, pos.same = ns, 1
        else:
            pos.same += 1
        yield ns, text


def append(path: str, lines: list[tuple[int, str]]) -> None:
    data = "".join(json.dumps({"t": ns // 1_000_000, "m": m, "ns": ns}) + "\n" for ns, m in lines)
    if data:
        with open(path, "a", encoding="utf-8") as f:
            f.write(data)


def copy_once(api: KubeApi, pod: str, container: str, path: str, *, follow: bool = False) -> int:
    """Append what the log has beyond ``path``'s last line; the number of lines added."""
    pos = position(path)
    added = 0
    batch: list[tuple[int, str]] = []
    for ns, text in fresh_lines(api.pod_log(pod, container, since_time=since_time(pos), follow=follow), pos):
        batch.append((ns, text))
        if follow or len(batch) >= 256:  # followed lines are kept as they come
            append(path, batch)
            added += len(batch)
            batch = []
    append(path, batch)
    return added + len(batch)


class Followers:
    """The follower threads of one runtime. One writer per log file: a follower holds the
    file's lock while it runs, and a one-off copy (:meth:`copy_if_idle`) happens only when no
    follower holds it, so two readers of one stream never append the same lines twice."""

    def __init__(self, api: KubeApi, *, reconnect_s: float = 0.5) -> None:
        self.api = api
        self.reconnect_s = reconnect_s
        self._threads: dict[str, threading.Thread] = {}
        self._files: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def _file_lock(self, path: str) -> threading.Lock:
        with self._lock:
            return self._files.setdefault(path, threading.Lock())

    def copy_if_idle(self, pod: str, container: str, path: str) -> int:
        """One non-follow copy, unless a follower is writing ``path`` (it has the lines)."""
        lock = self._file_lock(path)
        if not lock.acquire(blocking=False):
            return 0
        try:
            return copy_once(self.api, pod, container, path)
        finally:
            lock.release()

    def wait(self, path: str, timeout: float) -> None:
        """Give the followers of ``path`` up to ``timeout`` s to finish (their container ended)."""
        with self._lock:
            threads = [t for k, t in self._threads.items() if k.startswith(path + "\0")]
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def follow(self, pod: str, container: str, path: str, ended: Callable[[], bool]) -> None:
        """Follow ``pod``'s ``container`` into ``path`` until ``ended()`` says the container is
        over (checked when a stream ends); a second call for the same file while it runs is a
        no-op, a later one after the pod changed (a replacement) follows the new pod."""
        key = f"{path}\0{pod}"
        with self._lock:
            t = self._threads.get(key)
            if t is not None and t.is_alive():
                return
            if t is not None:  # finished before: one more non-follow copy catches what is left
                self._threads.pop(key)
            t = threading.Thread(target=self._run, args=(pod, container, path, ended), daemon=True,
                                 name=f"murphy-k8s-log-{pod}")
            self._threads[key] = t
            t.start()

    def _run(self, pod: str, container: str, path: str, ended: Callable[[], bool]) -> None:
        with self._file_lock(path):
            self._follow(pod, container, path, ended)

    def _follow(self, pod: str, container: str, path: str, ended: Callable[[], bool]) -> None:
        while not self._stop.is_set():
            try:
                copy_once(self.api, pod, container, path, follow=True)
            except KubernetesNotFound:
                return  # the pod is gone: what was copied is all there is
            except KubernetesError as e:
                if e.status != 400:  # 400: "waiting to start", no log yet
                    log.debug("log of %s/%s: %s", pod, container, e)
            except OSError as e:
                log.warning("cannot write the log of %s/%s: %s", pod, container, e)
                return
            try:
                if ended():
                    copy_once(self.api, pod, container, path)
                    return
            except KubernetesNotFound:
                return
            except KubernetesError as e:
                log.debug("log of %s/%s: %s", pod, container, e)
            self._stop.wait(self.reconnect_s)

    def active(self, path: str) -> bool:
        with self._lock:
            return any(k.startswith(path + "\0") and t.is_alive() for k, t in self._threads.items())

    def close(self, timeout: float = 1.0) -> None:
        self._stop.set()
        with self._lock:
            threads = list(self._threads.values())
        deadline = time.monotonic() + timeout  # one deadline for all: a followed stream may block
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
