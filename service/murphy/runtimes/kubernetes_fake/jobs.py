"""The batch/v1 Job controller, as Kubernetes 1.31+ runs it, for the fields murphy uses.

NonIndexed and Indexed completion modes (``completions``, ``parallelism``; an Indexed pod gets
the ``batch.kubernetes.io/job-completion-index`` annotation and label, ``JOB_COMPLETION_INDEX``
from the label through the downward API in every container that does not define it, and the
hostname ``<job>-<index>``), ``backoffLimit``,
``activeDeadlineSeconds``, ``podFailurePolicy`` (FailJob, Ignore, Count on exit codes and pod
conditions), ``podReplacementPolicy`` (``Failed``: no replacement while the old pod terminates),
``suspend``; ``status`` with active/ready/terminating/succeeded/failed, ``completedIndexes``,
``startTime``/``completionTime`` and the conditions: ``FailureTarget`` then ``Failed`` once no
pod is left running (reasons BackoffLimitExceeded, DeadlineExceeded, PodFailurePolicy),
``SuccessCriteriaMet`` then ``Complete``.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from murphy.runtimes.kubernetes_fake.admission import INDEX_KEY
from murphy.runtimes.kubernetes_fake.errors import ApiStatusError
from murphy.runtimes.kubernetes_fake.recorder import record
from murphy.runtimes.kubernetes_fake.selectors import match_label_selector
from murphy.runtimes.kubernetes_fake.store import Obj, now_iso, parse_iso

if TYPE_CHECKING:
    from murphy.runtimes.kubernetes_fake.cluster import FakeCluster

_TERMINAL = ("Succeeded", "Failed")
#: The finalizer the Job controller puts on its pods, so that it counts each one before it goes.
TRACKING = "batch.kubernetes.io/job-tracking"
INDEX_ENV = "JOB_COMPLETION_INDEX"
#: A generateName prefix is cut to this many characters (names.MaxGeneratedNameLength: 63 - 5).
MAX_GENERATED_NAME = 58


def finished(pod: Obj) -> str | None:
    """``Succeeded``/``Failed`` once the pod ran its course; a pod whose deletion is done
    (``deletionGracePeriodSeconds: 0``) before it succeeded counts as failed."""
    phase = (pod.get("status") or {}).get("phase")
    if phase in _TERMINAL:
        return str(phase)
    meta = pod["metadata"]
    if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds") == 0:
        return "Failed"
    return None


def _controller_uid(pod: Obj) -> str | None:
    return next((r.get("uid") for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def compress(indexes: set[int]) -> str:
    """``{0, 1, 2, 5}`` → ``"0-2,5"`` (``status.completedIndexes``)."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(indexes):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def _index(pod: Obj) -> int | None:
    value = ((pod["metadata"].get("annotations") or {}).get(INDEX_KEY))
    return int(value) if value is not None and str(value).isdigit() else None


def _condition(job: Obj, type_: str) -> dict[str, Any] | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_ and c.get("status") == "True":
            return dict(c)
    return None


def _rule_matches(rule: dict[str, Any], pod: Obj) -> str | None:
    """The FailJob message's middle part when ``rule`` matches the failed ``pod``."""
    meta, status = pod["metadata"], pod.get("status") or {}
    codes = rule.get("onExitCodes")
    if codes:
        values = set(codes.get("values") or [])
        for cs in status.get("containerStatuses") or []:
            if codes.get("containerName") and cs.get("name") != codes["containerName"]:
                continue
            term = (cs.get("state") or {}).get("terminated")
            if not term:
                continue
            code = term.get("exitCode")
            if code != 0 and ((codes.get("operator") == "In") == (code in values)):
                return f"Container {cs['name']} for pod {meta['namespace']}/{meta['name']} failed with exit code {code}"
        return None
    for want in rule.get("onPodConditions") or []:
        for c in status.get("conditions") or []:
            if c.get("type") == want.get("type") and c.get("status") == want.get("status", "True"):
                return f"Pod {meta['namespace']}/{meta['name']} has condition {c['type']}"
    return None


class JobController:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.store = cluster.store
        #: Per Job uid: the pods already counted (uid → Succeeded | Failed | Ignored).
        self.counted: dict[str, dict[str, str]] = {}
        self.indexes: dict[str, set[int]] = {}
        #: Per Job uid: the pods seen so far, so that one removed before it finished counts as
        #: failed (what the job-tracking finalizer guarantees in Kubernetes).
        self.seen: dict[str, set[str]] = {}
        #: Per Job uid: when to try creating a pod again after the API refused one.
        self.retry_at: dict[str, float] = {}

    def sync_all(self) -> None:
        pods = list(self.store.iter_all("pods"))
        jobs = {j["metadata"]["uid"]: j for j in self.store.iter_all("jobs")}
        for job in jobs.values():
            with contextlib.suppress(ApiStatusError):  # changed under us: the next round sees it
                self.sync(job, pods)
        for p in pods:
            if TRACKING not in (p["metadata"].get("finalizers") or []):
                continue
            owner = _controller_uid(p)
            owning = jobs.get(owner or "")
            counted = p["metadata"]["uid"] in self.counted.get(owner or "", {})
            idle = owning is None or bool(owning["metadata"].get("deletionTimestamp")) or bool(
                _condition(owning, "Complete") or _condition(owning, "Failed"))
            if counted or owning is None or (idle and finished(p)):
                with contextlib.suppress(ApiStatusError):
                    self.store.remove_finalizer("pods", p["metadata"]["namespace"], p["metadata"]["name"], TRACKING)

    def _owned(self, job: Obj, pods: list[Obj]) -> list[Obj]:
        uid = job["metadata"]["uid"]
        sel = (job.get("spec") or {}).get("selector")
        return [p for p in pods if p["metadata"].get("namespace") == job["metadata"]["namespace"]
                and any(r.get("uid") == uid and r.get("controller") for r in p["metadata"].get("ownerReferences") or [])
                and match_label_selector(sel, p["metadata"].get("labels") or {})]

    def sync(self, job: Obj, all_pods: list[Obj]) -> None:
        meta, spec = job["metadata"], job.get("spec") or {}
        uid = meta["uid"]
        if _condition(job, "Complete") or _condition(job, "Failed"):
            self._ttl(job)
            return
        if meta.get("deletionTimestamp"):
            return
        pods = self._owned(job, all_pods)
        counted = self.counted.setdefault(uid, {})
        done_idx = self.indexes.setdefault(uid, set())
        status = dict(job.get("status") or {})
        conditions = list(status.get("conditions") or [])
        now = now_iso()
        if spec.get("suspend"):
            for p in pods:
                if not p["metadata"].get("deletionTimestamp") and (p.get("status") or {}).get("phase") not in _TERMINAL:
                    self._delete_pod(job, p)
            self._write(job, {**status, "active": 0, "conditions": self._set(conditions, "Suspended", "JobSuspended", "Job suspended")})
            return
        status.setdefault("startTime", now)
        failure: tuple[str, str] | None = None
        fail_target = _condition(job, "FailureTarget")
        if fail_target:
            failure = (fail_target.get("reason", ""), fail_target.get("message", ""))
        seen = self.seen.setdefault(uid, set())
        present = {p["metadata"]["uid"] for p in pods}
        for gone in seen - present:
            counted.setdefault(gone, "Failed")
        seen |= present
        for p in pods:
            puid, phase = p["metadata"]["uid"], finished(p)
            if puid in counted or phase is None:
                continue
            if phase == "Succeeded":
                counted[puid] = "Succeeded"
                idx = _index(p)
                if idx is not None:
                    done_idx.add(idx)
                continue
            verdict = "Failed"
            for i, rule in enumerate((spec.get("podFailurePolicy") or {}).get("rules") or []):
                what = _rule_matches(rule, p)
                if what is None:
                    continue
                if rule.get("action") == "Ignore":
                    verdict = "Ignored"
                elif rule.get("action") == "FailJob" and failure is None:
                    failure = ("PodFailurePolicy", f"{what} matching FailJob rule at index {i}")
                break
            counted[puid] = verdict
        succeeded = sum(1 for v in counted.values() if v == "Succeeded")
        failed = sum(1 for v in counted.values() if v == "Failed")
        live = [p for p in pods if finished(p) is None]
        active = [p for p in live if not p["metadata"].get("deletionTimestamp")]
        terminating = [p for p in live if p["metadata"].get("deletionTimestamp")]
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions")
        if failure is None and failed > int(spec.get("backoffLimit", 6)):
            failure = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        deadline = spec.get("activeDeadlineSeconds")
        if failure is None and deadline is not None and time.time() - parse_iso(status["startTime"]) >= int(deadline):
            failure = ("DeadlineExceeded", "Job was active longer than specified deadline")
        complete = (len(done_idx) >= int(completions or 0)) if indexed else (completions is not None and succeeded >= int(completions))
        if completions is None and not indexed and succeeded > 0 and not active:
            complete = True
        if failure is not None:
            if not fail_target:
                conditions = self._set(conditions, "FailureTarget", *failure)
                record(self.store, job, "Warning", failure[0], failure[1], "job-controller")
            for p in active:
                self._delete_pod(job, p)
            if not live:
                conditions = self._set(conditions, "Failed", *failure)
        elif complete:
            conditions = self._set(conditions, "SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods")
            for p in active:
                self._delete_pod(job, p)
            if not live:
                conditions = self._set(conditions, "Complete", "CompletionsReached", "Reached expected number of succeeded pods")
                status["completionTime"] = now
                record(self.store, job, "Normal", "Completed", "Job completed", "job-controller")
        else:
            active = active + self._create_pods(job, pods, active, terminating, done_idx, succeeded)
        status.update(active=len(active), succeeded=succeeded, failed=failed, terminating=len(terminating),
                      ready=sum(1 for p in active if any(c.get("type") == "Ready" and c.get("status") == "True"
                                                         for c in (p.get("status") or {}).get("conditions") or [])),
                      uncountedTerminatedPods={}, conditions=conditions)
        if indexed:
            status["completedIndexes"] = compress(done_idx)
        if not conditions:
            status.pop("conditions")
        self._write(job, status)

    def _create_pods(self, job: Obj, pods: list[Obj], active: list[Obj], terminating: list[Obj], done_idx: set[int],
                     succeeded: int) -> list[Obj]:
        spec = job["spec"]
        parallelism = int(spec.get("parallelism", 1))
        wait_terminating = spec.get("podReplacementPolicy") == "Failed"
        created: list[Obj] = []
        if spec.get("completionMode") == "Indexed":
            busy = {_index(p) for p in active} | ({_index(p) for p in terminating} if wait_terminating else set())
            for idx in range(int(spec["completions"])):
                if len(active) + len(created) >= parallelism:
                    break
                if idx in done_idx or idx in busy:
                    continue
                pod = self._create_pod(job, idx)
                if pod is None:
                    break
                created.append(pod)
            return created
        completions = spec.get("completions")
        want = parallelism if completions is None else min(parallelism, int(completions) - succeeded)
        want -= len(active) + (len(terminating) if wait_terminating else 0)
        made: list[Obj] = []
        for _ in range(max(0, want)):
            pod = self._create_pod(job, None)
            if pod is None:
                break
            made.append(pod)
        return made

    def _create_pod(self, job: Obj, index: int | None) -> Obj | None:
        meta, template = job["metadata"], job["spec"]["template"]
        tmeta = template.get("metadata") or {}
        labels, annotations = dict(tmeta.get("labels") or {}), dict(tmeta.get("annotations") or {})
        spec = dict(template.get("spec") or {})
        name = meta["name"]
        generate = f"{name}-"
        if index is not None:
            # As the real controller does (pkg/controller/job): the index as an annotation and
            # (PodIndexLabel, on since 1.28) a label, the hostname <job>-<index> (whatever the
            # template says), and JOB_COMPLETION_INDEX appended to every container's env unless
            # the container defines it already, from the label.
            labels[INDEX_KEY] = annotations[INDEX_KEY] = str(index)
            spec["hostname"] = f"{name}-{index}"
            env_var = {"name": INDEX_ENV, "valueFrom": {"fieldRef": {
                "apiVersion": "v1", "fieldPath": f"metadata.labels['{INDEX_KEY}']"}}}
            for key in ("initContainers", "containers"):
                if key in spec:
                    spec[key] = [c if any(e.get("name") == INDEX_ENV for e in c.get("env") or [])
                                 else {**c, "env": [*(c.get("env") or []), env_var]} for c in spec[key]]
            generate = f"{name}-{index}-"
            if len(generate) > MAX_GENERATED_NAME:
                generate = generate[:MAX_GENERATED_NAME - len(f"-{index}-")] + f"-{index}-"
        pod = {"metadata": {"generateName": generate, "labels": labels,
                            "annotations": annotations, "finalizers": [TRACKING],
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": meta["uid"],
                                                 "controller": True, "blockOwnerDeletion": True}]},
               "spec": spec}
        key = meta["uid"]
        if time.monotonic() < self.retry_at.get(key, 0.0):
            return None
        try:
            out = self.store.create(self.cluster.kind("pods"), meta["namespace"], pod)
        except ApiStatusError as e:
            # Quota, PodSecurity, a missing service account: the Job has no pod, only this event.
            self.retry_at[key] = time.monotonic() + 1.0
            record(self.store, job, "Warning", "FailedCreate", f"Error creating: {e.message}", "job-controller")
            return None
        self.retry_at.pop(key, None)
        record(self.store, job, "Normal", "SuccessfulCreate", f"Created pod: {out['metadata']['name']}", "job-controller")
        return out

    def _delete_pod(self, job: Obj, pod: Obj) -> None:
        try:
            self.store.delete(self.cluster.kind("pods"), pod["metadata"]["namespace"], pod["metadata"]["name"])
            record(self.store, job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}", "job-controller")
        except ApiStatusError:
            pass

    @staticmethod
    def _set(conditions: list[dict[str, Any]], type_: str, reason: str, message: str) -> list[dict[str, Any]]:
        if any(c.get("type") == type_ and c.get("status") == "True" for c in conditions):
            return conditions
        now = now_iso()
        return [*[c for c in conditions if c.get("type") != type_],
                {"type": type_, "status": "True", "reason": reason, "message": message,
                 "lastProbeTime": now, "lastTransitionTime": now}]

    def _write(self, job: Obj, status: dict[str, Any]) -> None:
        uid = job["metadata"]["uid"]

        def apply(o: Obj) -> None:
            if o["metadata"].get("uid") == uid:
                o["status"] = status
        self.store.mutate("jobs", job["metadata"]["namespace"], job["metadata"]["name"], apply)

    def _ttl(self, job: Obj) -> None:
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        if ttl is None or job["metadata"].get("deletionTimestamp"):
            return
        st = job.get("status") or {}
        finished = st.get("completionTime") or (_condition(job, "Failed") or {}).get("lastTransitionTime")
        if finished and time.time() - parse_iso(finished) >= int(ttl):
            self.store.delete(self.cluster.kind("jobs"), job["metadata"]["namespace"], job["metadata"]["name"],
                              propagation="Background")
