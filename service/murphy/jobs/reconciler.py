"""The reconciler: nothing of this installation runs unaccounted for.

At service start and every ``reconciler_interval_s`` the supervisor asks the runtime for every
container carrying this installation's labels (:meth:`Runtime.list_containers`: the engine, the
OS or the API server answers, not murphy's records) and holds each against its job's record:

- no such job in the store, or the job is terminal: killed and removed;
- the job's record names another container under that name, or none of that name at all
  ("owned by nobody"): killed and removed;
- a live job whose record holds no handle for it yet (a crash between launch and the write of
  the handle): left running when the job is still to be launched (its launch is idempotent on
  the name and re-attaches to it), killed when the job is stopping or that container's launch
  was given up;
- the container on the job's record: left alone (the supervisor watches it).

Every kill is logged with its reason. The reconciler runs in the supervisor's thread, between
its passes, so no launch of this service is ever in flight while it looks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from murphy.exceptions import JobNotFound, MurphyError
from murphy.jobs.model import JobRecord, RuleEvaluationStatus, SecondaryStatus
from murphy.jobs.plans import containers, recorded
from murphy.runtimes.base import FoundContainer, Runtime
from murphy.store.base import JobStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Swept:
    """One container the reconciler acted on, and why."""

    job_name: str
    container_name: str
    was_live: bool
    reason: str


def verdict(rec: JobRecord | None, c: FoundContainer) -> str | None:
    """Why ``c`` must go, or None when it is accounted for (or will be, by its job's launch)."""
    if rec is None:
        return f"no job {c.job_name!r} in the store"
    if rec.is_terminal():
        return f"its job is {rec.status.value}"
    names = containers(rec)
    if c.container_name not in names:
        return f"owned by nobody: job {rec.name} has no container of that name"
    rule = names[c.container_name]
    held = recorded(rec, c.container_name)
    if held is not None:
        return None if held.id == c.handle.id else f"owned by nobody: job {rec.name} records container {held.id} under that name"
    if rec.secondary == SecondaryStatus.Stopping:
        return f"job {rec.name} is stopping and never recorded it"
    if rule is not None and rule.status != RuleEvaluationStatus.InProgress:
        return f"job {rec.name} gave up launching rule {rule.name} ({rule.status.value})"
    return None  # the job's own launch re-attaches to it


class Reconciler:
    def __init__(self, store: JobStore, runtime: Runtime) -> None:
        self.store = store
        self.runtime = runtime

    def sweep(self) -> list[Swept]:
        """One look at everything the runtime has; returns what was killed or removed."""
        found = self.runtime.list_containers()
        records: dict[str, JobRecord | None] = {}
        out: list[Swept] = []
        for c in found:
            if c.job_name not in records:
                records[c.job_name] = self._get(c.job_name)
            rec = records[c.job_name]
            reason = verdict(rec, c)
            if reason is None:
                if rec is not None and c.live and _unrecorded(rec, c):
                    log.info("reconciler: container %s of live job %s is not on its record yet; its launch re-attaches it",
                             c.container_name, c.job_name)
                continue
            try:
                if c.live:
                    log.warning("reconciler: stopping container %s (job %s): %s", c.container_name, c.job_name, reason)
                    self.runtime.stop(c.handle, force=True)
                else:
                    log.info("reconciler: removing exited container %s (job %s): %s", c.container_name, c.job_name, reason)
                self.runtime.remove(c.handle)
            except MurphyError as e:  # one that resists must not shield the others; the next sweep retries
                log.warning("reconciler: cannot stop container %s (job %s): %s", c.container_name, c.job_name, e)
                continue
            out.append(Swept(c.job_name, c.container_name, c.live, reason))
        return out

    def _get(self, name: str) -> JobRecord | None:
        try:
            return self.store.get(name)
        except JobNotFound:
            return None


def _unrecorded(rec: JobRecord, c: FoundContainer) -> bool:
    return recorded(rec, c.container_name) is None

