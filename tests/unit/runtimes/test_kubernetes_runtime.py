"""KubernetesRuntime over the in-memory KubeApi fake (murphy.runtimes.kubernetes_client): launch
idempotency, status, give-ups, stop with Foreground and escalation, re-attachment, listing, logs.
The real client against a real HTTP server is tested in tests/e2e (the fake API server)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from murphy.auth.keys import KeyRing
from murphy.auth.s3gateway import S3Gateway
from murphy.exceptions import RuntimeBackendError
from murphy.runtimes import kubernetes_names as kn
from murphy.runtimes import kubernetes_objects as ko
from murphy.runtimes.base import RulePlan, Runtime, TrainingPlan
from murphy.runtimes.kubernetes import KubernetesRuntime, log_path
from murphy.runtimes.kubernetes_client import FakeKubeApi, KubernetesError
from murphy.settings import Settings
from murphy.store.memory import InMemoryJobStore

OPTS = ko.KubernetesOptions(namespace="murphy-jobs", runtime_id="rid", s3_endpoint_url="http://s3:8333", stop_grace_s=120)


class Clock:
    def __init__(self) -> None:
        self.t = time.time()

    def __call__(self) -> float:
        return self.t


def training(hosts: int = 1) -> TrainingPlan:
    return TrainingPlan(container_name="job-1-training", job_name="job-1", image="murphy/pytorch-cpu:latest",
                        hyperparameters={"sagemaker_program": '"train.py"'}, environment={}, instance_type="ml.m5.xlarge",
                        instance_count=hosts, debug_hook_config={"S3OutputPath": "s3://b/debug"},
                        tensor_uri="s3://b/debug/job-1/debug-output", output_uri="s3://b/out/job-1/output",
                        max_runtime_s=600, account="123456789012", region="us-east-1")


def rule(i: int = 0) -> RulePlan:
    return RulePlan(container_name=f"job-1-rule-{i}", job_name="job-1", rule_name=f"Rule{i}",
                    image="murphy/rule-evaluator:latest", rule_parameters={"rule_to_invoke": "LossNotDecreasing"},
                    base_trial_uri="s3://b/debug/job-1/debug-output", result_uri=f"s3://b/debug/job-1/rule-output/Rule{i}",
                    account="123456789012", region="us-east-1")


#: The service's own S3 identity, which must never reach a pod.
SERVICE_KEY, SERVICE_SECRET = "AKIASERVICEKEY", "service-s3cr3t-never-in-a-pod"
_STORES: dict[Path, InMemoryJobStore] = {}


def gateway(tmp_path: Path) -> S3Gateway:
    """murphy's real S3 gateway over the test's job store (one per test directory, as one
    database outlives a restarted murphy), the service's credentials given, not read from the env."""
    store = _STORES.setdefault(tmp_path, InMemoryJobStore())
    return S3Gateway(KeyRing(store, Settings(data_dir=tmp_path / "data")), "http://s3:8333",
                     credentials=lambda: (SERVICE_KEY, SERVICE_SECRET, None))


def keys(tmp_path: Path) -> dict[str, str]:
    """The job store's keys: id -> the container name murphy issued it for."""
    return {k["AccessKeyId"]: k["UserName"] for k in KeyRing(_STORES[tmp_path], Settings()).list()["AccessKeyMetadata"]}


def runtime(tmp_path: Path, api: FakeKubeApi, clock: Clock, **kw: Any) -> KubernetesRuntime:
    return KubernetesRuntime(tmp_path / "containers", api, OPTS, credentials=gateway(tmp_path), clock=clock,
                             poll_interval_s=1.0, **kw)


def ts(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def add_pod(api: FakeKubeApi, job_name: str, *, index: int = 0, phase: str = "Running", main: str = "algo",
            state: dict[str, Any] | None = None, created: float | None = None) -> str:
    """What the Job controller and the kubelet would do: a pod of the Job with the template's labels."""
    job = api.objects[("Job", job_name)]
    labels = {**job["spec"]["template"]["metadata"]["labels"], "job-name": job_name}
    name = f"{job_name}-{index}-x{index}"
    api.objects[("Pod", name)] = {
        "kind": "Pod", "metadata": {"name": name, "uid": f"pod-{name}", "labels": labels,
                                    "creationTimestamp": ts(created or time.time()),
                                    "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
                                    "ownerReferences": [{"kind": "Job", "name": job_name, "uid": job["metadata"]["uid"]}]},
        "status": {"phase": phase, "containerStatuses": [{"name": main, "image": "x",
                                                          "state": state or {"running": {"startedAt": ts(time.time())}}}]}}
    return name


def set_state(api: FakeKubeApi, pod: str, phase: str, state: dict[str, Any]) -> None:
    st = api.objects[("Pod", pod)]["status"]
    st["phase"] = phase
    st["containerStatuses"][0]["state"] = state


def test_is_a_runtime(tmp_path: Path) -> None:
    assert isinstance(runtime(tmp_path, FakeKubeApi(), Clock()), Runtime)


def test_launch_creates_the_objects_owned_by_the_anchor_and_is_idempotent(tmp_path: Path) -> None:
    api, clock = FakeKubeApi(), Clock()
    rt = runtime(tmp_path, api, clock)
    h = rt.launch(training())
    creates = [(k, n) for verb, k, n, _ in api.calls if verb == "create"]
    assert [k for k, _ in creates] == ["ConfigMap", "Secret", "Job"]
    anchor = api.objects[("ConfigMap", kn.config_map_name("rid", training()))]
    assert anchor["metadata"]["annotations"][kn.MAX_RUNTIME] == "600"
    for kind, name in creates[1:]:
        owners = api.objects[(kind, name)]["metadata"]["ownerReferences"]
        assert owners == [{"apiVersion": "v1", "kind": "ConfigMap", "name": anchor["metadata"]["name"],
                           "uid": anchor["metadata"]["uid"], "blockOwnerDeletion": True, "controller": False}]
    job = api.objects[("Job", kn.training_name("rid", training()))]
    assert h.id == job["metadata"]["uid"] and h.data["name"] == job["metadata"]["name"] and h.runtime == "kubernetes"
    # A second launch (a restarted murphy) adopts everything: same handle, nothing new.
    before = len(api.objects)
    again = runtime(tmp_path, api, clock).launch(training())
    assert again == h and len(api.objects) == before
    # The rule Job: owned by the same anchor, its deadline derived from the training's max runtime.
    hr = rt.launch(rule(0))
    rjob = api.objects[("Job", kn.rule_job_name("rid", rule(0)))]
    assert rjob["metadata"]["ownerReferences"][0]["uid"] == anchor["metadata"]["uid"]
    assert rjob["spec"]["activeDeadlineSeconds"] == 600 + OPTS.startup_budget_s + OPTS.rule_grace_s
    assert hr.data["role"] == "rule" and hr.data["key"] == kn.rule_key("rid", rule(0))


def test_a_name_taken_by_another_spec_is_refused(tmp_path: Path) -> None:
    api = FakeKubeApi()
    rt = runtime(tmp_path, api, Clock())
    rt.launch(training())
    job = api.objects[("Job", kn.training_name("rid", training()))]
    job["metadata"]["annotations"][kn.SPEC_HASH] = "sha256:someone-else"
    with pytest.raises(RuntimeBackendError, match="exists with another spec"):
        runtime(tmp_path, api, Clock()).launch(training())


def test_a_rule_needs_its_anchor(tmp_path: Path) -> None:
    with pytest.raises(RuntimeBackendError, match="anchor ConfigMap"):
        runtime(tmp_path, FakeKubeApi(), Clock()).launch(rule(0))


def test_status_follows_the_pod_and_is_polled_at_a_bounded_rate(tmp_path: Path) -> None:
    api, clock = FakeKubeApi(), Clock()
    rt = runtime(tmp_path, api, clock)
    h = rt.launch(training())
    assert rt.status(h).phase == "pending"
    pod = add_pod(api, h.data["name"])
    assert rt.status(h).phase == "pending"  # cached: within the poll interval nothing is asked
    n = api.requests
    for _ in range(50):
        rt.status(h)
    assert api.requests == n
    clock.t += 1.5
    st = rt.status(h)
    assert (st.phase, st.stage) == ("running", "Training")
    set_state(api, pod, "Succeeded", {"terminated": {"exitCode": 0, "reason": "Completed"}})
    clock.t += 1.5
    st = rt.status(h)
    assert (st.phase, st.exit_code) == ("exited", 0)


def test_a_failure_the_job_never_reports_is_recorded_and_the_job_deleted(tmp_path: Path) -> None:
    api, clock = FakeKubeApi(), Clock()
    rt = runtime(tmp_path, api, clock)
    h = rt.launch(training())
    add_pod(api, h.data["name"], phase="Pending",
            state={"waiting": {"reason": "InvalidImageName", "message": "couldn't parse image name"}})
    st = rt.status(h)
    assert st.phase == "pending"
    assert ("delete", "Job", h.data["name"], {"propagation": "Foreground", "grace_s": None}) in api.calls
    anchor = api.objects[("ConfigMap", h.data["anchor"])]
    assert anchor["metadata"]["annotations"][f"{kn.FAILURE}.training"].startswith("ClientError: Failed to pull image")
    clock.t += 1.5
    # A restarted murphy (no memory) still reports it: it was recorded on the anchor.
    st = runtime(tmp_path, api, clock).status(h)
    assert st.phase == "exited" and st.failure is not None and st.failure.startswith("ClientError: Failed to pull image")


def test_stop_annotates_then_deletes_foreground_and_escalates(tmp_path: Path) -> None:
    api, clock = FakeKubeApi(), Clock()
    api.instant_deletes = False
    rt = runtime(tmp_path, api, clock, escalate_after_s=30)
    h = rt.launch(training())
    pod = add_pod(api, h.data["name"])
    rt.stop(h)
    job = api.objects[("Job", h.data["name"])]
    assert job["metadata"]["annotations"][kn.STOP_REASON] == "stop-requested"
    assert job["metadata"]["deletionTimestamp"]
    verbs = [(v, k) for v, k, _, _ in api.calls]
    assert verbs.index(("patch", "Job")) < verbs.index(("delete", "Job"))
    assert ("delete", "Job", h.data["name"], {"propagation": "Foreground", "grace_s": None}) in api.calls
    assert rt.status(h).phase == "running"  # Stopping: the Job still exists
    rt.stop(h, force=True)  # the supervisor's SIGKILL time, before the pods' grace is over: not yet
    assert not [c for c in api.calls if c[:2] == ("delete", "Pod")]
    clock.t += 120 + 31
    rt.status(h)  # past grace + 30 s, the pod still there: deleted with gracePeriodSeconds=0
    assert ("delete", "Pod", pod, {"propagation": "Background", "grace_s": 0}) in api.calls
    api.finish_deletes()
    clock.t += 1.5
    st = rt.status(h)
    assert st.phase == "exited" and st.failure is None  # Stopped, nothing left
    rt.stop(h)  # stopping what is gone never raises


def test_reattach_checks_the_uid(tmp_path: Path) -> None:
    api, clock = FakeKubeApi(), Clock()
    h = runtime(tmp_path, api, clock).launch(training())
    add_pod(api, h.data["name"])
    fresh = runtime(tmp_path, api, clock)
    assert fresh.status(h).phase == "running"
    api.objects[("Job", h.data["name"])]["metadata"]["uid"] = "another"
    clock.t += 1.5
    st = fresh.status(h)
    assert st.phase == "missing" and "re-created outside murphy" in (st.failure or "")
    del api.objects[("Job", h.data["name"])]
    clock.t += 1.5
    st = fresh.status(h)
    assert st.phase == "missing" and "deleted outside murphy" in (st.failure or "")


def test_list_containers_by_labels(tmp_path: Path) -> None:
    api, clock = FakeKubeApi(), Clock()
    rt = runtime(tmp_path, api, clock)
    h = rt.launch(training())
    hr = rt.launch(rule(0))
    found = {f.container_name: f for f in rt.list_containers("job-1")}
    assert set(found) == {"job-1-training", "job-1-rule-0"}
    assert found["job-1-training"].handle.id == h.id and found["job-1-rule-0"].handle.id == hr.id
    assert found["job-1-rule-0"].role == "rule" and found["job-1-training"].job_name == "job-1"
    assert found["job-1-training"].handle.data["anchor"] == h.data["anchor"]
    assert rt.list_containers("job-2") == []
    other = KubernetesRuntime(tmp_path / "o", api, ko.KubernetesOptions(runtime_id="other", s3_endpoint_url="http://s3"))
    assert other.list_containers() == []
    rt.remove(h)  # the anchor, and with it everything it owns
    assert rt.list_containers() == []


def _lines(*pairs: tuple[str, str]) -> list[str]:
    return [f"{t} {m}" for t, m in pairs]


def test_logs_are_copied_without_duplicates_across_reconnects_and_restarts(tmp_path: Path) -> None:
    api, clock = FakeKubeApi(), Clock()
    rt = runtime(tmp_path, api, clock)
    h = rt.launch(training())
    pod = add_pod(api, h.data["name"], phase="Succeeded", state={"terminated": {"exitCode": 0}})
    api.logs[(pod, "algo")] = _lines(("2026-12-01T10:00:00.100000000Z", "step 0"),
                                     ("2026-12-01T10:00:00.100000000Z", "step 0 again, same ns"),
                                     ("2026-12-01T10:00:00.900000000Z", "step 1"))
    rt.status(h)
    rt.followers.wait(log_path(h.data, 0), 5)  # the container ended: its follower copies all and ends
    assert [e.message for e in rt.read_logs(h).events] == ["step 0", "step 0 again, same ns", "step 1"]
    # The stream is served again from the whole second (sinceTime has seconds), with more lines.
    api.logs[(pod, "algo")] += _lines(("2026-12-01T10:00:01.000000001Z", "step 2"))
    fresh = runtime(tmp_path, api, clock)  # a restarted murphy: read_logs starts its follower
    fresh.read_logs(h)
    fresh.followers.wait(log_path(h.data, 0), 5)
    page = fresh.read_logs(h)
    assert [e.message for e in page.events] == ["step 0", "step 0 again, same ns", "step 1", "step 2"]
    since = [c[3]["since_time"] for c in api.calls if c[0] == "log"]
    assert since[0] is None and "2026-12-01T10:00:00Z" in since
    rt.remove(h)
    assert ("Pod", pod) not in api.objects
    assert len(runtime(tmp_path, api, clock).read_logs(h).events) == 4  # kept after the pod is gone


def test_api_errors_surface_as_runtime_errors(tmp_path: Path) -> None:
    api = FakeKubeApi()
    api.fail_with = KubernetesError("Kubernetes API: create ConfigMap x: forbidden (403 Forbidden)", status=403)
    with pytest.raises(RuntimeBackendError, match="403"):
        runtime(tmp_path, api, Clock()).launch(training())


def test_a_transient_refusal_at_launch_is_tried_again(tmp_path: Path) -> None:
    api = FakeKubeApi()
    real_create = api.create
    failures = [KubernetesError("Kubernetes API: create ConfigMap: etcdserver: request timed out (500)", status=500,
                                retryable=True)]

    def flaky(obj: dict[str, Any]) -> dict[str, Any]:
        if failures:
            raise failures.pop()
        return real_create(obj)

    api.create = flaky  # type: ignore[method-assign]
    h = runtime(tmp_path, api, Clock()).launch(training())
    assert ("Job", h.data["name"]) in api.objects


@dataclass(frozen=True)
class HostPlan(TrainingPlan):
    """A plan of one host, as a supervisor that launches each host on its own makes them."""

    current_host: str = "algo-1"
    hosts: tuple[str, ...] = ("algo-1",)
    first_host_container: str = ""


def test_one_plan_per_host_shares_one_indexed_job(tmp_path: Path) -> None:
    api, clock = FakeKubeApi(), Clock()
    rt = runtime(tmp_path, api, clock)
    base = training(hosts=2)
    hosts = ("algo-1", "algo-2")
    plans = [HostPlan(**{**base.__dict__, "container_name": name, "current_host": host, "hosts": hosts,
                         "first_host_container": "job-1-training"})
             for name, host in (("job-1-training", "algo-1"), ("job-1-training-2", "algo-2"))]
    h2 = rt.launch(plans[1])  # in any order: every host's launch ensures the one Job
    h1 = rt.launch(plans[0])
    jobs = [o for (k, _), o in api.objects.items() if k == "Job"]
    assert len(jobs) == 1 and jobs[0]["spec"]["completions"] == 2
    assert jobs[0]["metadata"]["annotations"][kn.CONTAINER_NAME] == "job-1-training"
    assert ("Service", kn.training_name("rid", base)) in api.objects
    assert h1.id == h2.id and (h1.data["host"], h2.data["host"]) == (0, 1)
    assert h2.data["container_name"] == "job-1-training-2"
    add_pod(api, h1.data["name"], index=0, phase="Succeeded", state={"terminated": {"exitCode": 0}})
    add_pod(api, h1.data["name"], index=1, phase="Failed",
            state={"terminated": {"exitCode": 3, "message": "boom"}})
    assert (rt.status(h1).phase, rt.status(h1).exit_code) == ("exited", 0)
    st = rt.status(h2)
    assert (st.phase, st.exit_code, st.failure) == ("exited", 3, "AlgorithmError: boom, exit code: 3")
