"""The Kubernetes runtime: a job's training hosts and rule evaluators as batch/v1 Jobs in one
namespace, behind the same :class:`~murphy.runtimes.base.Runtime` protocol as processes and
Docker (docs/kubernetes.md).

- ``launch(TrainingPlan)`` creates, in order, the anchor ConfigMap, the S3 Secret, the headless
  Service (more than one host) and the Indexed training Job, each but the anchor owned by it; a
  ``launch(RulePlan)`` creates the rule's Secret and Job, owned by the same anchor. Each Secret
  holds only a key murphy's S3 gateway issued for those pods, revoked on ``remove``
  (:mod:`murphy.runtimes.kubernetes_keys`); the pods' S3 endpoint is the gateway. Objects come from the
  pure builders (:mod:`murphy.runtimes.kubernetes_objects`). A name that exists already is
  adopted when its ``murphy.io/spec-hash`` matches (a re-launch after a crash), refused otherwise.
- ``status`` reads the Job and its pods (events only while nothing runs) and maps them with
  :func:`murphy.runtimes.kubernetes_status.observe`, at most once per ``poll_interval_s`` per
  container, so the API request rate per job is bounded whatever the job does. A failure the
  Job never reports by itself (image pull, unschedulable, bad config) is recorded on the anchor,
  the Job deleted, and reported once it is gone.
- ``stop`` records the stop on the Job and the anchor, then deletes the Job with
  ``propagationPolicy=Foreground`` (SIGTERM, SIGKILL after the pods' grace); pods still there
  ``escalate_after_s`` past the grace are deleted with ``gracePeriodSeconds=0``.
- Logs are followed into murphy's log store by :mod:`murphy.runtimes.kubernetes_logs`.

The handle holds the namespace, the Job's name and uid, the anchor's name: a restarted murphy
re-attaches from it (same uid: the same Job; another uid: re-created outside murphy, ``missing``).
The client is a :class:`~murphy.runtimes.kubernetes_client.KubeApi`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes import kubernetes_hosts as kh
from murphy.runtimes import kubernetes_names as kn
from murphy.runtimes import kubernetes_objects as ko
from murphy.runtimes import logfile
from murphy.runtimes.base import (
    ContainerState,
    FoundContainer,
    Handle,
    JobCredentials,
    LogPage,
    Plan,
    RulePlan,
    TrainingPlan,
)
from murphy.runtimes.kubernetes_client import KubeApi, KubernetesConflict, KubernetesError, Obj
from murphy.runtimes.kubernetes_keys import PodKeys
from murphy.runtimes.kubernetes_logs import Followers
from murphy.runtimes.kubernetes_resources import pod_resources
from murphy.runtimes.kubernetes_status import Limits, Observation, epoch, observe

log = logging.getLogger(__name__)
#: Objects a re-launch adopts whatever their spec hash (a Secret holds the key issued at its creation).
_ADOPT_ANY = ("Secret", "Service")


def log_path(d: Mapping[str, Any], host: int) -> str:
    """Host ``host`` (0-based)'s log file: ``log.jsonl`` for algo-1, ``log-algo-<n>.jsonl`` after."""
    return str(Path(d["dir"], "log.jsonl" if host == 0 else f"log-algo-{host + 1}.jsonl"))


class KubernetesRuntime:
    """:class:`~murphy.runtimes.base.Runtime` on a Kubernetes API server (module docstring)."""

    def __init__(self, root_dir: Path, api: KubeApi, options: ko.KubernetesOptions, *,
                 credentials: JobCredentials | None = None, limits: Limits | None = None,
                 poll_interval_s: float = 1.0, escalate_after_s: float = 30.0,
                 clock: Callable[[], float] = time.time, name: str = "kubernetes") -> None:
        ko.check_options(options)
        if api.namespace != options.namespace:
            raise RuntimeBackendError(f"the client works in namespace {api.namespace!r}, the options name {options.namespace!r}")
        self.root_dir = Path(root_dir)
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self.api = api
        self.options = options
        self.rid = options.runtime_id
        self.name = name
        self.limits = limits or Limits()
        self.poll_interval_s = poll_interval_s
        self.escalate_after_s = escalate_after_s
        self.clock = clock
        #: The pods' S3 keys; ``options.s3_endpoint_url`` is then the gateway as pods reach it.
        self.keys = PodKeys(api, options, credentials)
        self._cache: dict[str, tuple[float, Observation]] = {}
        self._lock = threading.Lock()
        self._launch_locks: dict[str, threading.Lock] = {}
        self.followers = Followers(api)

    # ---- launch ----------------------------------------------------------------------------

    def launch(self, plan: Plan) -> Handle:
        with self._lock:
            lock = self._launch_locks.setdefault(plan.container_name, threading.Lock())
        with lock:
            # A launch that fails fails the job: a transient refusal (429, 5xx, a dropped
            # connection) is tried again first. Launching again is safe (adoption by spec hash).
            try:
                return self._launch_retried(plan)
            except BaseException:  # the job fails: the key its pods would hold stops working now
                self.keys.discard(kh.first_host_plan(plan) if isinstance(plan, TrainingPlan) else plan)
                raise

    def _launch_retried(self, plan: Plan) -> Handle:
        for delay in (0.5, 1.0, 2.0, None):
            try:
                if isinstance(plan, TrainingPlan):
                    return self._launch_training(plan)
                return self._launch_rule(plan)
            except KubernetesError as e:
                if not e.retryable or delay is None:
                    raise
                log.warning("kubernetes: launching %s: %s; trying again in %.1f s", plan.container_name, e, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _launch_training(self, plan: TrainingPlan) -> Handle:
        # One plan per host (``current_host``/``hosts``, where the supervisor launches each host
        # on its own): every host's launch ensures the one Indexed Job, made from algo-1's plan,
        # and gets a handle on its own pod (completion index = host - 1).
        host = kh.plan_host(plan)
        first = kh.first_host_plan(plan)
        handle = self._launch_job(first)
        if host is not None:
            handle.data["host"] = host
            handle.data["container_name"] = plan.container_name
        return handle

    def _launch_job(self, plan: TrainingPlan) -> Handle:
        opts = self.options
        res = pod_resources(plan.instance_type, opts.profiles)
        files, env = ko.training_files(plan, opts, res)
        objs = [ko.config_map(plan, files, opts)]
        if kh.host_count(plan) > 1:
            objs.append(ko.headless_service(plan, opts))
        objs.append(ko.training_job(plan, env, opts, res))
        anchor = self._ensure(kn.with_spec_hash(objs[0]))
        uid = str(anchor["metadata"]["uid"])
        key_id = self.keys.ensure(plan, anchor, self._ensure)
        job: Obj = anchor
        for obj in objs[1:]:
            job = self._ensure(ko.owned_by(kn.with_spec_hash(obj), anchor, uid))
        return self._handle(plan, job, anchor["metadata"]["name"], "training", kh.host_count(plan), key_id)

    def _launch_rule(self, plan: RulePlan) -> Handle:
        name = kn.config_map_name(self.rid, plan)
        anchor = self.api.get("ConfigMap", name)
        if anchor is None:
            raise RuntimeBackendError(f"the job's anchor ConfigMap {self.options.namespace}/{name} does not exist "
                                      "(its training was not launched, or was removed)")
        raw = (anchor["metadata"].get("annotations") or {}).get(kn.MAX_RUNTIME)
        obj = ko.rule_job(plan, self.options, max_runtime_s=int(raw) if raw and raw.isdigit() else None)
        key_id = self.keys.ensure(plan, anchor, self._ensure)
        job = self._ensure(ko.owned_by(kn.with_spec_hash(obj), anchor, str(anchor["metadata"]["uid"])))
        return self._handle(plan, job, name, kn.rule_key(self.rid, plan), 1, key_id)

    def _ensure(self, obj: Obj) -> Obj:
        """Create ``obj``, or adopt the object of that name when it is the same launch."""
        kind, name = obj["kind"], obj["metadata"]["name"]
        want = obj["metadata"]["annotations"][kn.SPEC_HASH]
        for _ in range(2):
            try:
                return self.api.create(obj)
            except KubernetesConflict:
                existing = self.api.get(kind, name)
            if existing is None:
                continue  # deleted in between: create again
            meta = existing["metadata"]
            if meta.get("deletionTimestamp"):
                raise KubernetesError(f"{kind} {self.options.namespace}/{name} is still being deleted; "
                                      "the launch is retried", retryable=True)
            have = (meta.get("annotations") or {}).get(kn.SPEC_HASH)
            if have == want or kind in _ADOPT_ANY:
                return existing
            raise RuntimeBackendError(
                f"{kind} {self.options.namespace}/{name} exists with another spec ({have or 'no spec hash'}, this "
                f"launch: {want}): it is not this job's; delete it, or give this murphy another runtime id")
        raise KubernetesError(f"cannot create {kind} {name}: it keeps vanishing", retryable=True)

    def _handle(self, plan: Plan, job: Obj, anchor: str, key: str, hosts: int, key_id: str | None) -> Handle:
        meta = job["metadata"]
        labels = kn.object_labels(self.rid, plan)
        selector = {k: labels[k] for k in (kn.MANAGED_BY, kn.RUNTIME_ID, kn.JOB_KEY, kn.ROLE, kn.RULE_KEY) if k in labels}
        handle = self._handle_of(plan.container_name, plan.job_name, plan.role, meta["name"], str(meta["uid"]), anchor,
                                 key, hosts, selector, ko.secret_of(job))
        if key_id:
            handle.data["s3_access_key_id"] = key_id
        return handle

    def _handle_of(self, container: str, job_name: str, role: str, name: str, uid: str, anchor: str, key: str,
                   hosts: int, selector: Mapping[str, str], secret: str | None) -> Handle:
        d = self.root_dir / container
        d.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {
            "namespace": self.options.namespace, "kind": "Job", "name": name, "anchor": anchor, "key": key,
            "role": role, "container_name": container, "job_name": job_name, "hosts": hosts,
            "selector": dict(selector), "dir": str(d), "log": str(d / "log.jsonl"),
        }
        if secret:
            data["secret"] = secret
        return Handle(runtime=self.name, id=uid, data=data)

    # ---- status ----------------------------------------------------------------------------

    def status(self, handle: Handle) -> ContainerState:
        obs = self.observe(handle)
        st = obs.state
        if st.phase in ("exited", "missing") and not st.log_tail:
            tail = logfile.tail(log_path(handle.data, int(handle.data.get("host") or 0)))
            st = ContainerState(st.phase, st.exit_code, st.failure, tail, st.started_at, st.ended_at, st.stage)
        return st

    def observe(self, handle: Handle) -> Observation:
        """The mapped observation (cached for ``poll_interval_s``; acts on a give-up)."""
        now = self.clock()
        key = _cache_key(handle)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and 0 <= now - hit[0] < self.poll_interval_s:
            return hit[1]
        obs = self._observe(handle, now)
        with self._lock:
            self._cache[key] = (now, obs)
        return obs

    def _observe(self, handle: Handle, now: float) -> Observation:
        d = handle.data
        role: Literal["training", "rule"] = "rule" if d.get("role") == "rule" else "training"
        job = self.api.get("Job", d["name"])
        pods = self.api.list("Pod", labels=d["selector"]) if job is not None else []
        stop_at, failure = None, None
        if job is not None:
            stop_at = epoch_s((job["metadata"].get("annotations") or {}).get(kn.STOP_REQUESTED_AT))
        else:
            notes = self._anchor_notes(d)
            stop_at, failure = epoch_s(notes.get(f"{kn.STOP_REQUESTED_AT}.{d['key']}")), notes.get(f"{kn.FAILURE}.{d['key']}")
        quiet = job is not None and not pods
        events = self.api.list("Event", fields={"involvedObject.uid": str(job["metadata"]["uid"])}) if quiet and job else []
        hosts = int(d.get("hosts") or 1)
        if d.get("host") is not None:  # one host's handle: its pod only
            pods = [p for p in pods if kh.pod_index(p) == int(d["host"])]
            hosts = 1
        obs = observe(role, job, pods, events, now=now, expected_uid=handle.id, hosts=hosts,
                      limits=self.limits, stop_requested=stop_at is not None, recorded_failure=failure)
        if obs.give_up and job is not None:
            self._give_up(handle, obs.give_up)
        if obs.deleting and stop_at is not None and now - stop_at >= self.options.stop_grace_s + self.escalate_after_s:
            self._force(pods)
        for pod, container, host in obs.log_sources:
            self._follow(handle, pod, container, host)
        return obs

    def _anchor_notes(self, d: Mapping[str, Any]) -> dict[str, str]:
        anchor = self.api.get("ConfigMap", d["anchor"])
        return dict((anchor or {}).get("metadata", {}).get("annotations") or {})

    def _give_up(self, handle: Handle, reason: str) -> None:
        d = handle.data
        log.warning("kubernetes: giving up on %s (%s): %s", d["name"], d["container_name"], reason)
        self.api.patch_annotations("ConfigMap", d["anchor"], {f"{kn.FAILURE}.{d['key']}": reason[:4000]})
        self.api.delete("Job", d["name"], propagation="Foreground")

    def _force(self, pods: list[Obj]) -> None:
        for pod in pods:
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                name = pod["metadata"]["name"]
                log.warning("kubernetes: pod %s outlived its grace period; deleting it with gracePeriodSeconds=0 "
                            "(on an unreachable node its process may still run)", name)
                self.api.delete("Pod", name, propagation="Background", grace_s=0)

    def _follow(self, handle: Handle, pod: str, container: str, host: int) -> None:
        path = log_path(handle.data, host)

        def ended() -> bool:
            p = self.api.get("Pod", pod)
            if p is None:
                return True
            for cs in (p.get("status") or {}).get("containerStatuses") or []:
                if cs.get("name") == container:
                    return bool((cs.get("state") or {}).get("terminated"))
            return (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")

        self.followers.follow(pod, container, path, ended)

    # ---- list ------------------------------------------------------------------------------

    def list_containers(self, job_name: str | None = None) -> list[FoundContainer]:
        labels = {kn.MANAGED_BY: "murphy", kn.RUNTIME_ID: self.rid}
        if job_name is not None:
            labels[kn.JOB] = kn.label_value(job_name)
        out = []
        for job in self.api.list("Job", labels=labels):
            meta = job["metadata"]
            ann, lab = meta.get("annotations") or {}, meta.get("labels") or {}
            jname = ann.get(kn.JOB_NAME, "")
            if job_name is not None and jname != job_name:
                continue
            role: Literal["training", "rule"] = "rule" if lab.get(kn.ROLE) == "rule" else "training"
            owners = meta.get("ownerReferences") or [{}]
            selector = {k: lab[k] for k in (kn.MANAGED_BY, kn.RUNTIME_ID, kn.JOB_KEY, kn.ROLE, kn.RULE_KEY) if k in lab}
            handle = self._handle_of(ann.get(kn.CONTAINER_NAME, meta["name"]), jname, role, meta["name"], str(meta["uid"]),
                                     str(owners[0].get("name") or ""), lab.get(kn.RULE_KEY, "training") if role == "rule" else "training",
                                     int((job.get("spec") or {}).get("completions") or 1), selector, ko.secret_of(job))
            out.append(FoundContainer(handle, jname, handle.data["container_name"], role, _job_phase(job)))
        return out

    # ---- stop / remove ---------------------------------------------------------------------

    def stop(self, handle: Handle, *, force: bool = False) -> None:
        d = handle.data
        now = self.clock()
        with self._lock:  # every host's look is stale now
            for k in [k for k in self._cache if k.split("/", 1)[0] == handle.id]:
                del self._cache[k]
        reason = "rule-stopped" if d.get("role") == "rule" else "stop-requested"
        notes = self._anchor_notes(d) if d.get("anchor") else {}
        key = f"{kn.STOP_REQUESTED_AT}.{d['key']}"
        stop_at = epoch_s(notes.get(key))
        if stop_at is None and d.get("anchor"):
            self.api.patch_annotations("ConfigMap", d["anchor"], {key: str(now)})
            stop_at = now
        job = self.api.patch_annotations("Job", d["name"], {kn.STOP_REQUESTED_AT: str(stop_at or now), kn.STOP_REASON: reason})
        if job is None or job["metadata"].get("uid") != handle.id:
            return  # gone already (or someone else's Job of that name: not ours to delete)
        if not job["metadata"].get("deletionTimestamp"):
            self.api.delete("Job", d["name"], propagation="Foreground")
        if force and now - (stop_at or now) >= self.options.stop_grace_s:
            self._force(self.api.list("Pod", labels=d["selector"]))

    def remove(self, handle: Handle) -> None:
        """Revoke the pods' S3 key, copy what is left of the logs, then delete the job's objects
        (a training handle: the anchor, and with it everything it owns; a rule: its Job and Secret)."""
        d = handle.data
        self.keys.revoke(d)
        try:
            for pod in self.api.list("Pod", labels=d["selector"]):
                host = int((pod["metadata"].get("annotations") or {}).get("batch.kubernetes.io/job-completion-index") or 0)
                path = log_path(d, host)
                self.followers.wait(path, 2.0)  # its container ended: the stream is at its end
                with contextlib.suppress(KubernetesError, OSError):
                    self.followers.copy_if_idle(pod["metadata"]["name"], "rule" if d.get("role") == "rule" else "algo", path)
            if d.get("role") == "training" and d.get("anchor"):
                self.api.delete("ConfigMap", d["anchor"], propagation="Foreground")
            else:
                self.api.delete("Job", d["name"], propagation="Foreground")
                if d.get("secret"):
                    self.api.delete("Secret", d["secret"], propagation="Background")
        except KubernetesError as e:
            log.warning("kubernetes: cannot remove %s: %s", d.get("name"), e)
        Path(d["dir"], "log.done").touch()

    # ---- logs ------------------------------------------------------------------------------

    def read_logs(self, handle: Handle, cursor: int = 0, limit: int = 10_000) -> LogPage:
        d = handle.data
        path = log_path(d, int(d.get("host") or 0))
        if not self.followers.active(path) and not Path(d["dir"], "log.done").exists():
            with contextlib.suppress(KubernetesError, OSError):
                self.observe(handle)  # (re)starts the followers of a job re-attached after a restart
        return logfile.read_page(path, cursor, limit)

    def close(self) -> None:
        self.followers.close()
        self.api.close()
        self.keys.close()


def _cache_key(handle: Handle) -> str:
    """Hosts of one Job share its uid: a look is one host's (or every host's, ``*``)."""
    host = handle.data.get("host")
    return f"{handle.id}/{'*' if host is None else host}"


def epoch_s(raw: object) -> float | None:
    """An annotation's epoch seconds (or RFC 3339 time), None when absent or unreadable."""
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        return epoch(raw)


def _job_phase(job: Obj) -> Literal["pending", "running", "exited"]:
    st = job.get("status") or {}
    done = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in st.get("conditions") or [])
    if done and not st.get("active") and not (job.get("metadata") or {}).get("deletionTimestamp"):
        return "exited"
    if st.get("active") or st.get("startTime") or (job.get("metadata") or {}).get("deletionTimestamp"):
        return "running"
    return "pending"
