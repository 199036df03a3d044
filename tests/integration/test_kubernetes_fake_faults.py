"""Scripted faults of the fake cluster, as the Kubernetes runtime's failure mapping will see them
through lightkube: Unschedulable, ErrImagePull/ImagePullBackOff, InvalidImageName,
CreateContainerConfigError, OOMKilled, eviction and preemption (DisruptionTarget)."""

# ruff: noqa: F811

from __future__ import annotations

from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Event, Pod, Secret
from test_kubernetes_fake_pods import conditions, job, pods_of, wait_job

from k8s_fake import fake_k8s, lightkube_client  # noqa: F401 (the fixture; tests name it as a parameter)
from murphy.runtimes.kubernetes_fake import FakeCluster
from murphy.runtimes.kubernetes_fake.faults import ANNOTATION


def client(cluster: FakeCluster) -> Client:
    return lightkube_client(cluster)  # type: ignore[no-any-return]


def waiting(c: Client, job_name: str) -> tuple[str, str] | None:
    for p in pods_of(c, job_name):
        for cs in (p.status.containerStatuses or []) if p.status else []:
            if cs.state.waiting:
                return cs.state.waiting.reason, cs.state.waiting.message or ""
    return None


def test_unschedulable_from_resources_and_from_a_fault(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(job("gpu", "print(1)", container={"resources": {"limits": {"nvidia.com/gpu": "1"}}}))
    fake_k8s.faults.add("Unschedulable", selector="batch.kubernetes.io/job-name=quota",
                        message="0/1 nodes are available: 1 Insufficient memory.")
    c.create(job("quota", "print(1)"))
    for name, text in (("gpu", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."),
                       ("quota", "0/1 nodes are available: 1 Insufficient memory.")):
        pod = fake_k8s.wait_for(lambda n=name: [p for p in pods_of(c, n) if p.status and p.status.conditions], what=name)[0]
        cond = next(x for x in pod.status.conditions if x.type == "PodScheduled")
        assert (cond.status, cond.reason) == ("False", "Unschedulable") and cond.message.startswith(text)
        assert pod.status.phase == "Pending" and not pod.spec.nodeName
        events = list(c.list(Event, fields={"involvedObject.name": pod.metadata.name}))
        assert [e.reason for e in events] == ["FailedScheduling"] and events[0].type == "Warning"
        assert c.get(Job, name).status.active == 1  # the Job counts a Pending pod as active
    fake_k8s.faults.clear()
    wait_job(fake_k8s, c, "quota", "Complete")


def test_image_pull_failures(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(job("missing", "", container={"image": "registry.example.com/nothing:1.0"}))
    c.create(job("badname", "", container={"image": "Bad Image::"}))
    reason = fake_k8s.wait_for(lambda: (w := waiting(c, "missing")) and w[0] == "ImagePullBackOff" and w, timeout=20,
                               what="ImagePullBackOff")
    assert reason[1] == 'Back-off pulling image "registry.example.com/nothing:1.0"'
    pod = pods_of(c, "missing")[0]
    messages = [e.message for e in c.list(Event, fields={"involvedObject.name": pod.metadata.name})]
    assert "Error: ErrImagePull" in messages and any(m.startswith('Failed to pull image "registry.example.com') for m in messages)
    assert pod.status.phase == "Pending" and conditions(c.get(Job, "missing")) == []
    bad = fake_k8s.wait_for(lambda: waiting(c, "badname") if (waiting(c, "badname") or ("",))[0] == "InvalidImageName" else None,
                            what="InvalidImageName")
    assert "invalid reference format" in bad[1]


def test_create_container_config_error_until_the_key_exists(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    env = [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "late", "key": "KEY"}}}]
    c.create(job("late", "import os; print(os.environ['K'])", container={"env": env}))
    w = fake_k8s.wait_for(lambda: waiting(c, "late") if (waiting(c, "late") or ("",))[0] == "CreateContainerConfigError" else None,
                          what="CreateContainerConfigError")
    assert w[1] == 'secret "late" not found'
    c.create(from_dict({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "late"}, "stringData": {"OTHER": "x"}}))
    fake_k8s.wait_for(lambda: waiting(c, "late") == ("CreateContainerConfigError", "couldn't find key KEY in Secret default/late"),
                      what="the missing key")
    c.delete(Secret, "late")
    c.create(from_dict({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "late"}, "stringData": {"KEY": "finally"}}))
    wait_job(fake_k8s, c, "late", "Complete")
    assert list(c.log(pods_of(c, "late")[0].metadata.name)) == ["finally\n"]


def test_oom_killed(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(job("oomed", "import time; print('allocating', flush=True); time.sleep(30)",
                 annotations={ANNOTATION: "OOMKilled", f"{ANNOTATION}-after": "0.3"}))
    failed = wait_job(fake_k8s, c, "oomed", "Failed")
    term = pods_of(c, "oomed")[0].status.containerStatuses[0].state.terminated
    assert (term.exitCode, term.reason) == (137, "OOMKilled")
    assert next(x.reason for x in failed.status.conditions if x.type == "Failed") == "BackoffLimitExceeded"


def test_eviction_and_preemption_set_disruption_target(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    fake_k8s.faults.add("Evicted", selector="batch.kubernetes.io/job-name=evicted", after_s=0.2)
    fake_k8s.faults.add("Preempted", selector="batch.kubernetes.io/job-name=preempted", after_s=0.2, times=1)
    sleeper = "import time; print('up', flush=True); time.sleep(0.8)"
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0]}}]}
    c.create(job("evicted", "import time; time.sleep(30)", pod={"terminationGracePeriodSeconds": 1}))
    c.create(job("preempted", sleeper, podFailurePolicy=policy, podReplacementPolicy="Failed",
                 pod={"terminationGracePeriodSeconds": 1}))
    evicted = wait_job(fake_k8s, c, "evicted", "Failed")
    pod = pods_of(c, "evicted")[0]
    assert (pod.status.phase, pod.status.reason) == ("Failed", "Evicted")
    assert pod.status.message.startswith("The node was low on resource: memory.")
    cond = next(x for x in pod.status.conditions if x.type == "DisruptionTarget")
    assert (cond.status, cond.reason) == ("True", "TerminationByKubelet")
    assert evicted.status.failed == 1
    # Preempted once: the DisruptionTarget pod is ignored by the failure policy and replaced.
    done = wait_job(fake_k8s, c, "preempted", "Complete")
    pods = pods_of(c, "preempted")
    assert len(pods) == 1 and done.status.failed == 0 and done.status.succeeded == 1
    events = [e for e in fake_k8s.store.iter_all("events") if e["reason"] == "Preempted"]
    assert len(events) == 1 and fake_k8s.store.find("pods", "default", events[0]["involvedObject"]["name"]) is None
    assert isinstance(pods[0], Pod)


def test_pod_creation_refused_shows_as_failed_create(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(job("nosa", "print('ran')", pod={"serviceAccountName": "nobody"}))
    event = fake_k8s.wait_for(lambda: [e for e in c.list(Event, fields={"involvedObject.name": "nosa"})
                                       if e.reason == "FailedCreate"], what="FailedCreate")[0]
    assert event.type == "Warning" and event.message == (
        'Error creating: pods "nosa-0-" is forbidden: error looking up service account default/nobody: '
        'serviceaccount "nobody" not found')
    assert not pods_of(c, "nosa") and c.get(Job, "nosa").status.active == 0
    c.create(from_dict({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody"}}))
    wait_job(fake_k8s, c, "nosa", "Complete")
