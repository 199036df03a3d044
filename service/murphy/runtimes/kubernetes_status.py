"""What a training or rule Job's objects mean in SageMaker's terms (one pure function, no client).

:func:`observe` takes what the API server shows of one container of a job (its Job, the Job's
pods, their events) and what murphy recorded on the job's anchor (a stop it asked for, a failure
it gave up on) and answers a :class:`~murphy.runtimes.base.ContainerState` for the supervisor,
plus ``give_up``: a failure the Job will never report itself (a pod Pending for ever on an image
pull, an unschedulable request, a bad container config), which the runtime records on the anchor
before deleting the Job (docs/kubernetes.md, "Failure mapping", has the table).

Terminal means gone: a host is ``exited`` only once its pod is terminal (phase Succeeded/Failed);
a Job being deleted (``deletionTimestamp``) is still ``running`` until the API server forgets it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from murphy.runtimes.base import ContainerState
from murphy.runtimes.docker_logs import rfc3339_ns

Obj = Mapping[str, Any]
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
_IMAGE_NOW = {"InvalidImageName", "ErrImageNeverPull"}  # never resolves by waiting
_IMAGE_LATER = {"ErrImagePull", "ImagePullBackOff"}
_START_FAILED = {"RunContainerError", "CrashLoopBackOff", "StartError"}
OOM_TEXT = ("OutOfMemoryError: Please use an instance type with more memory, or reduce the size of job data "
            "processed on an instance.")


@dataclass(frozen=True)
class Limits:
    #: A pod Pending on an image pull (ErrImagePull/ImagePullBackOff) this long fails the job.
    image_pull_s: float = 300.0
    #: A pod unschedulable (or a Job whose pods the API refuses to create) this long fails it.
    scheduling_s: float = 1800.0


@dataclass(frozen=True)
class Observation:
    state: ContainerState
    #: A failure murphy must act on (record it, delete the Job, report it once the Job is gone).
    give_up: str | None = None
    #: Why it waits (a waiting reason, the scheduler's message); "" when nothing is wrong.
    message: str = ""
    #: ``(pod name, container, host index)`` whose logs exist (the container started).
    log_sources: tuple[tuple[str, str, int], ...] = ()
    deleting: bool = False
    pod_names: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class _Host:
    phase: Literal["pending", "running", "succeeded", "failed", "replaced"]
    failure: str | None = None
    give_up: str | None = None
    exit_code: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    stage: str | None = None
    message: str = ""


def epoch(ts: object) -> float | None:
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return rfc3339_ns(ts) / 1e9
    except ValueError:
        return None


def _statuses(pod: Obj, key: str) -> dict[str, Obj]:
    return {str(c.get("name")): c for c in (pod.get("status") or {}).get(key) or []}


def _condition(obj: Obj, kind: str) -> Obj | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _true(cond: Obj | None) -> bool:
    return cond is not None and cond.get("status") == "True"


def job_failed(job: Obj) -> Obj | None:
    """The Job's ``Failed`` (or interim ``FailureTarget``) condition, when true."""
    for kind in ("Failed", "FailureTarget"):
        cond = _condition(job, kind)
        if _true(cond):
            return cond
    return None


def _waiting(main: str, pod: Obj, now: float, limits: Limits, image: str) -> _Host | None:
    """A pod that waits for something that will not come by itself (2.3 of the reference)."""
    st = pod.get("status") or {}
    since = epoch(st.get("startTime")) or epoch((pod.get("metadata") or {}).get("creationTimestamp")) or now
    for key in ("initContainerStatuses", "containerStatuses"):
        for name, cs in _statuses(pod, key).items():
            w = (cs.get("state") or {}).get("waiting") or {}
            reason, msg = str(w.get("reason") or ""), str(w.get("message") or "")
            img = str(cs.get("image") or image)
            if reason in _IMAGE_NOW or (reason in _IMAGE_LATER and now - since >= limits.image_pull_s):
                return _Host("pending", give_up=f"ClientError: Failed to pull image {img}: {reason}: {msg}".rstrip(": "),
                             message=reason)
            if reason in _IMAGE_LATER:
                return _Host("pending", message=f"{reason}: pulling image {img} ({msg})" if msg else reason)
            if reason == "CreateContainerConfigError":
                return _Host("pending", give_up=f"InternalServerError: Cannot configure container {name}: {msg}",
                             message=reason)
            if reason in _START_FAILED:
                return _Host("pending", give_up=f"ClientError: Cannot start container {name}: {reason}: {msg}".rstrip(": "),
                             message=reason)
    sched = _condition(pod, "PodScheduled")
    if sched is not None and sched.get("status") == "False" and sched.get("reason") == "Unschedulable":
        msg = str(sched.get("message") or "no node fits the pod")
        t = epoch(sched.get("lastTransitionTime")) or since
        if now - t >= limits.scheduling_s:
            return _Host("pending", give_up=f"CapacityError: Unable to provision requested ML compute capacity: {msg}",
                         message=msg)
        return _Host("pending", message=f"Unschedulable: {msg}")
    return None


def _terminated_failure(role: str, term: Obj, stop_requested: bool) -> tuple[str | None, int | None]:
    code = term.get("exitCode")
    code = int(code) if isinstance(code, int) else None
    msg = str(term.get("message") or "").strip()
    reason = str(term.get("reason") or "")
    if code == 0:
        return None, 0
    if reason == "OOMKilled" or (code == 137 and not stop_requested and role == "training"):
        detail = " (exit code 137: killed, most likely by the out-of-memory killer)" if reason != "OOMKilled" else ""
        return f"{OOM_TEXT}{detail}{(' ' + msg) if msg else ''}", code
    if role == "rule":
        return msg or f"the rule evaluator exited with code {code}", code
    if stop_requested:
        return None, code
    return f"AlgorithmError: {msg or 'the training process failed'}, exit code: {code}", code


def _pod_failed_reason(pod: Obj, job: Obj) -> str:
    st = pod.get("status") or {}
    reason, msg = str(st.get("reason") or ""), str(st.get("message") or "")
    disruption = _condition(pod, "DisruptionTarget")
    if _true(disruption):
        assert disruption is not None
        return (f"InternalServerError: Training pod was disrupted ({disruption.get('reason')}): "
                f"{disruption.get('message') or msg}")
    if reason == "Evicted" and "ephemeral-storage" in msg:
        return f"ClientError: Ran out of local disk (VolumeSizeInGB): {msg}"
    if reason == "Evicted" and "memory" in msg:
        return f"{OOM_TEXT} {msg}"
    if reason:
        return f"InternalServerError: Training pod failed ({reason}): {msg}".rstrip(": ")
    cond = job_failed(job)
    if cond is not None:
        return f"InternalServerError: the Job failed ({cond.get('reason')}): {cond.get('message') or ''}".rstrip(": ")
    return "InternalServerError: the training pod failed without a container exit status"


def _host(role: str, main: str, pod: Obj, job: Obj, now: float, limits: Limits, stop_requested: bool, image: str) -> _Host:
    st = pod.get("status") or {}
    phase = st.get("phase")
    inits, mains = _statuses(pod, "initContainerStatuses"), _statuses(pod, "containerStatuses")
    cs = mains.get(main) or {}
    state = cs.get("state") or {}
    started = epoch((state.get("running") or state.get("terminated") or {}).get("startedAt"))
    if phase in ("Succeeded", "Failed"):
        if phase == "Failed" and _true(_condition(pod, "DisruptionTarget")) and job_failed(job) is None:
            return _Host("replaced")  # podFailurePolicy Ignore: the Job makes another pod
        for name, ics in inits.items():
            term = (ics.get("state") or {}).get("terminated") or {}
            if term and term.get("exitCode") not in (0, None):
                text = str(term.get("message") or "").strip() or f"exit code {term.get('exitCode')}"
                return _Host("failed", failure=f"ClientError: Data download failed ({name}): {text}",
                             exit_code=int(term["exitCode"]))
        term = state.get("terminated") or {}
        ended = epoch(term.get("finishedAt"))
        if term:
            failure, code = _terminated_failure(role, term, stop_requested)
            if code == 0 and phase == "Succeeded":
                return _Host("succeeded", exit_code=0, started_at=started, ended_at=ended, stage="Training")
            return _Host("failed", failure=failure, exit_code=code, started_at=started, ended_at=ended, stage="Training")
        if stop_requested:
            return _Host("failed", started_at=started)
        return _Host("failed", failure=_pod_failed_reason(pod, job), started_at=started)
    if state.get("running") or state.get("terminated"):
        return _Host("running", started_at=started, stage="Training")
    waiting = _waiting(main, pod, now, limits, image)
    if waiting is not None:
        return waiting
    if any((c.get("state") or {}).get("running") for c in inits.values()):
        return _Host("pending", stage="Downloading", message="initializing /opt/ml")
    return _Host("pending")


def _index(pod: Obj) -> int:
    meta = pod.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(INDEX_KEY) or (meta.get("labels") or {}).get(INDEX_KEY) or "0"
    try:
        return int(raw)
    except ValueError:
        return 0


def _events_failure(job: Obj, events: Sequence[Obj], now: float, limits: Limits) -> tuple[str | None, str]:
    uid = (job.get("metadata") or {}).get("uid")
    bad = [e for e in events if e.get("reason") == "FailedCreate" and (e.get("involvedObject") or {}).get("uid") == uid]
    if not bad:
        return None, ""
    msg = str(bad[-1].get("message") or "")
    created = epoch((job.get("metadata") or {}).get("creationTimestamp")) or now
    if now - created >= limits.scheduling_s:
        return f"ClientError: Pod creation rejected: {msg}", msg
    return None, f"FailedCreate: {msg}"


def observe(role: Literal["training", "rule"], job: Obj | None, pods: Sequence[Obj], events: Sequence[Obj] = (), *,
            now: float, expected_uid: str | None = None, hosts: int = 1, limits: Limits | None = None,
            stop_requested: bool = False, recorded_failure: str | None = None, image: str = "") -> Observation:
    """The state of one container (training: every host of the Indexed Job) of a job."""
    limits = limits or Limits()
    main = "algo" if role == "training" else "rule"
    noun = "training Job" if role == "training" else "rule evaluator's Job"
    if job is None:
        if recorded_failure:
            return Observation(ContainerState("exited", failure=recorded_failure))
        if stop_requested:
            return Observation(ContainerState("exited"))
        return Observation(ContainerState("missing", failure=f"InternalServerError: the {noun} was deleted outside murphy"))
    meta = job.get("metadata") or {}
    if expected_uid and meta.get("uid") != expected_uid:
        return Observation(ContainerState("missing", failure=(
            f"InternalServerError: the {noun} {meta.get('name')} was re-created outside murphy "
            f"(uid {meta.get('uid')}, murphy created {expected_uid})")))
    deleting = bool(meta.get("deletionTimestamp"))
    juid = meta.get("uid")
    own = [p for p in pods if not juid or any(r.get("uid") == juid for r in (p.get("metadata") or {}).get("ownerReferences") or [])
           or not (p.get("metadata") or {}).get("ownerReferences")]
    newest: dict[int, Obj] = {}
    for p in sorted(own, key=lambda p: epoch((p.get("metadata") or {}).get("creationTimestamp")) or 0.0):
        newest[_index(p)] = p
    views = {i: _host(role, main, p, job, now, limits, stop_requested, image) for i, p in sorted(newest.items())}
    sources = tuple((str(p["metadata"]["name"]), main, i) for i, p in sorted(newest.items())
                    if views[i].phase in ("running", "succeeded", "failed"))
    names = tuple(str((p.get("metadata") or {}).get("name")) for p in own)

    def tag(i: int) -> str:
        return f" (algo-{i + 1})" if hosts > 1 else ""

    for i, v in views.items():
        if v.give_up and not deleting:
            return Observation(ContainerState("pending", stage=v.stage), give_up=v.give_up + tag(i), message=v.message,
                               log_sources=sources, pod_names=names)
    live = [v for v in views.values() if v.phase in ("pending", "running", "replaced")]
    failed = [(i, v) for i, v in views.items() if v.phase == "failed"]
    started = min((v.started_at for v in views.values() if v.started_at), default=None)
    complete = _true(_condition(job, "Complete")) or _true(_condition(job, "SuccessCriteriaMet"))
    short = not failed and len(views) < hosts and job_failed(job) is None and not complete
    if live or deleting or short:
        running = any(v.phase == "running" for v in views.values())
        stage = "Training" if running else next((v.stage for v in views.values() if v.stage), None)
        message = next((v.message for v in views.values() if v.message), "")
        if not views and not deleting:
            if (job.get("spec") or {}).get("suspend"):
                message = "Waiting for queue admission (the Job is suspended)"
            else:
                give_up, message = _events_failure(job, events, now, limits)
                if give_up:
                    return Observation(ContainerState("pending"), give_up=give_up, message=message)
        phase: Literal["pending", "running"] = "running" if running or deleting else "pending"
        return Observation(ContainerState(phase, started_at=started, stage=stage), message=message,
                           log_sources=sources, deleting=deleting, pod_names=names)
    ended = max((v.ended_at for v in views.values() if v.ended_at), default=None)
    if failed:
        # The host that failed first on its own: one SIGTERMed (143) after another failed
        # (the Job controller stops the others) is not the cause.
        i, v = min(failed, key=lambda iv: (iv[1].exit_code == 143, iv[1].ended_at or 0.0, iv[0]))
        failure = v.failure + tag(i) if v.failure else None
        return Observation(ContainerState("exited", exit_code=v.exit_code if v.exit_code is not None else None,
                                          failure=failure, log_tail=(v.failure or "") if role == "rule" else "",
                                          started_at=started, ended_at=ended, stage="Training"),
                           log_sources=sources, pod_names=names)
    cond = job_failed(job)
    if cond is not None:  # e.g. DeadlineExceeded: the controller removed the pods
        return Observation(ContainerState("exited", failure=(
            f"InternalServerError: the {noun} failed ({cond.get('reason')}): {cond.get('message') or ''}").rstrip(": "),
            started_at=started, ended_at=ended), log_sources=sources, pod_names=names)
    return Observation(ContainerState("exited", exit_code=0, started_at=started, ended_at=ended, stage="Training"),
                       log_sources=sources, pod_names=names)
