"""The fake cluster's Job controller and kubelet through lightkube: Indexed Jobs really run as
local processes (env, volumes, hostnames, peers by name, logs), stop with Foreground deletion
(SIGTERM, then SIGKILL after the grace period), and fail as Kubernetes 1.31+ reports it
(termination messages, podFailurePolicy, backoffLimit, activeDeadlineSeconds)."""

# ruff: noqa: F811

from __future__ import annotations

import time
import urllib.request
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.codecs import from_dict
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Event, Pod
from lightkube.types import CascadeType

from k8s_fake import fake_k8s, lightkube_client  # noqa: F401 (the fixture; tests name it as a parameter)
from murphy.runtimes.kubernetes_fake import FakeCluster

PY = "python:3.11-slim"


def client(cluster: FakeCluster) -> Client:
    return lightkube_client(cluster)  # type: ignore[no-any-return]


def job(name: str, script: str, *, completions: int = 1, indexed: bool = True, backoff: int = 0,
        pod: dict[str, Any] | None = None, container: dict[str, Any] | None = None,
        annotations: dict[str, str] | None = None, **spec: Any) -> Any:
    c = {"name": "main", "image": PY, "command": ["python", "-c", script], **(container or {})}
    doc = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
           "spec": {"completions": completions, "parallelism": completions, "backoffLimit": backoff,
                    **({"completionMode": "Indexed"} if indexed else {}), **spec,
                    "template": {"metadata": {"annotations": annotations or {}},
                                 "spec": {"restartPolicy": "Never", "containers": [c], **(pod or {})}}}}
    return from_dict(doc)


def conditions(j: Job) -> list[tuple[str, str | None]]:
    return [(c.type, c.reason) for c in (j.status.conditions or [])] if j.status else []


def wait_job(cluster: FakeCluster, c: Client, name: str, terminal: str, timeout: float = 60) -> Job:
    return cluster.wait_for(lambda: (j := c.get(Job, name)) and any(t == terminal for t, _ in conditions(j)) and j,
                            timeout=timeout, what=f"Job {name} {terminal}")


def pods_of(c: Client, name: str) -> list[Pod]:
    return sorted(c.list(Pod, labels={"batch.kubernetes.io/job-name": name}), key=lambda p: p.metadata.name)


def test_indexed_job_runs_its_pods_and_completes(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    script = ("import os, socket; print('index', os.environ['JOB_COMPLETION_INDEX'], socket.gethostname(), flush=True); "
              "print('second line')")
    c.create(job("hello", script, completions=2))
    done = wait_job(fake_k8s, c, "hello", "Complete")
    assert conditions(done) == [("SuccessCriteriaMet", "CompletionsReached"), ("Complete", "CompletionsReached")]
    assert (done.status.succeeded, done.status.active, done.status.completedIndexes) == (2, 0, "0-1")
    assert done.status.startTime and done.status.completionTime
    pods = pods_of(c, "hello")
    assert [p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods] == ["0", "1"]
    for i, p in enumerate(pods):
        assert p.metadata.name.startswith(f"hello-{i}-") and p.spec.hostname == f"hello-{i}"
        assert p.status.phase == "Succeeded"
        term = p.status.containerStatuses[0].state.terminated
        assert (term.exitCode, term.reason) == (0, "Completed")
        lines = list(c.log(p.metadata.name, timestamps=True))
        assert [ln.split(" ", 1)[1] for ln in lines] == [f"index {i} hello-{i}\n", "second line\n"]
        assert lines[0].split(" ", 1)[0].endswith("Z")
        assert list(c.log(p.metadata.name, tail_lines=1)) == ["second line\n"]
        reasons = [e.reason for e in c.list(Event, fields={"involvedObject.name": p.metadata.name})]
        assert reasons[:6] == ["Scheduled", "Pulling", "Pulled", "Created", "Started"][:len(reasons[:6])] or reasons
        assert {"Scheduled", "Pulling", "Pulled", "Created", "Started"} <= set(reasons)
    job_events = {e.reason for e in c.list(Event, fields={"involvedObject.name": "hello"})}
    assert {"SuccessfulCreate", "Completed"} <= job_events


def test_log_follow_streams_while_running(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(job("follow", "import time\nfor i in range(3):\n    print('tick', i, flush=True); time.sleep(0.3)"))
    pod = fake_k8s.wait_for(lambda: [p for p in pods_of(c, "follow") if p.status and p.status.phase == "Running"],
                            what="a running pod")[0]
    got = list(c.log(pod.metadata.name, follow=True))
    assert got == ["tick 0\n", "tick 1\n", "tick 2\n"]


def test_log_rotation_ends_follow_streams_and_since_time_resumes(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(job("rotating", "import time\nfor i in range(6):\n    print('tick', i, flush=True); time.sleep(0.3)"))
    pod = fake_k8s.wait_for(lambda: [p for p in pods_of(c, "rotating") if p.status and p.status.phase == "Running"],
                            what="a running pod")[0].metadata.name
    first: list[str] = []
    for line in c.log(pod, follow=True, timestamps=True):
        first.append(line)
        if len(first) == 2:
            assert fake_k8s.kubelet.rotate_logs("default", pod) == 1
    assert 2 <= len(first) < 6  # the stream ended early, before the container did
    last_ts = first[-1].split(" ", 1)[0]
    url = f"{fake_k8s.url}/api/v1/namespaces/default/pods/{pod}/log?follow=true&timestamps=true&sinceTime={last_ts}"
    with urllib.request.urlopen(url, timeout=30) as r:
        rest = [ln for ln in r.read().decode().splitlines(keepends=True) if ln.split(" ", 1)[0] > last_ts]
    assert [ln.split(" ", 1)[1] for ln in first + rest] == [f"tick {i}\n" for i in range(6)]


def test_foreground_delete_sigterm_then_sigkill(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    polite = ("import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *a: (print('got SIGTERM', flush=True), sys.exit(0)))\n"
              "print('up', flush=True)\ntime.sleep(60)")
    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\ntime.sleep(60)"
    c.create(job("polite", polite, pod={"terminationGracePeriodSeconds": 30}))
    c.create(job("stubborn", stubborn, pod={"terminationGracePeriodSeconds": 1}))
    for name in ("polite", "stubborn"):
        fake_k8s.wait_for(lambda n=name: any(list(c.log(p.metadata.name)) == ["up\n"] for p in pods_of(c, n)
                                             if p.status and p.status.phase == "Running"), what=f"{name} running")
    pods = {n: pods_of(c, n)[0].metadata.name for n in ("polite", "stubborn")}
    finals: dict[str, Any] = {}
    rv = str(fake_k8s.store.resource_version)  # watch from here: the polite pod may be gone before the watch starts
    for name in ("polite", "stubborn"):
        c.delete(Job, name, cascade=CascadeType.FOREGROUND)
    started = time.monotonic()
    deleted = 0
    for kind, p in c.watch(Pod, labels={"batch.kubernetes.io/job-name": ("polite", "stubborn")}, resource_version=rv):
        if p.metadata.deletionTimestamp and p.status.containerStatuses[0].state.terminated:
            finals[p.metadata.labels["batch.kubernetes.io/job-name"]] = p
        deleted += kind == "DELETED"
        if deleted == 2:
            break
    assert time.monotonic() - started < 20
    polite_term = finals["polite"].status.containerStatuses[0].state.terminated
    stubborn_term = finals["stubborn"].status.containerStatuses[0].state.terminated
    assert (polite_term.exitCode, polite_term.reason) == (0, "Completed")
    assert (stubborn_term.exitCode, stubborn_term.reason) == (137, "Error")
    # Each Job was held (deleting, with foregroundDeletion) until its pod went: read from a watch
    # from before the deletes, since the polite Job can be gone before a GET right after its delete.
    held, gone = set(), set()
    for kind, j in c.watch(Job, resource_version=rv):
        if kind == "MODIFIED" and j.metadata.deletionTimestamp and "foregroundDeletion" in (j.metadata.finalizers or []):
            held.add(j.metadata.name)
        elif kind == "DELETED":
            assert j.metadata.name in held
            gone.add(j.metadata.name)
            if len(gone) == 2:
                break
    for name in ("polite", "stubborn"):
        assert not fake_k8s.store.find("jobs", "default", name)
        assert not fake_k8s.store.find("pods", "default", pods[name])
    killing = [e for e in fake_k8s.store.iter_all("events") if e["reason"] == "Killing"]
    assert {e["involvedObject"]["name"] for e in killing} == set(pods.values())


def test_env_volumes_security_and_termination_message(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(from_dict({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                        "data": {"hyperparameters.json": '{"lr": "0.1"}', "MODE": "fast"}}))
    c.create(from_dict({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                        "stringData": {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "TOKEN": "t0k"}}))
    script = (
        "import os, errno\n"
        "print(os.environ['MODE'], os.environ['AWS_ACCESS_KEY_ID'], os.environ['TOK'], os.environ['WHO'], "
        "os.environ['GREETING'], os.environ['JOB_COMPLETION_INDEX'], flush=True)\n"
        "print(open('/murphy/config/hyperparameters.json').read(), open('/opt/ml/input/config/copied.json').read())\n"
        "try:\n    open('/outside', 'w')\nexcept OSError as e:\n    print('root read-only:', e.errno == errno.EROFS)\n"
        "open('/tmp/scratch', 'w').write('ok')\n"
        "open('/opt/ml/output/failure', 'w').write('ValueError: bad learning rate')\n"
        "raise SystemExit(3)\n")
    sc = {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}
    pod = {"securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000},
           "volumes": [{"name": "opt-ml", "emptyDir": {}}, {"name": "config", "configMap": {"name": "cfg"}},
                       {"name": "tmp", "emptyDir": {}}],
           "initContainers": [{"name": "init", "image": PY, "securityContext": sc,
                               "command": ["sh", "-c", "mkdir -p /opt/ml/input/config /opt/ml/output && "
                                           "cp /murphy/config/hyperparameters.json /opt/ml/input/config/copied.json"],
                               "volumeMounts": [{"name": "opt-ml", "mountPath": "/opt/ml"},
                                                {"name": "config", "mountPath": "/murphy/config", "readOnly": True}]}]}
    container = {"securityContext": sc, "terminationMessagePath": "/opt/ml/output/failure",
                 "terminationMessagePolicy": "FallbackToLogsOnError",
                 "env": [{"name": "WHO", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                         {"name": "GREETING", "value": "hi-$(MODE)"},
                         {"name": "TOK", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "TOKEN"}}}],
                 "envFrom": [{"configMapRef": {"name": "cfg"}}, {"secretRef": {"name": "creds"}}],
                 "volumeMounts": [{"name": "opt-ml", "mountPath": "/opt/ml"}, {"name": "tmp", "mountPath": "/tmp"},
                                  {"name": "config", "mountPath": "/murphy/config", "readOnly": True}]}
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0]}}]}
    c.create(job("envjob", script, pod=pod, container=container, podFailurePolicy=policy, podReplacementPolicy="Failed"))
    failed = wait_job(fake_k8s, c, "envjob", "Failed")
    assert [t for t, _ in conditions(failed)] == ["FailureTarget", "Failed"]
    reason, message = next((x.reason, x.message) for x in failed.status.conditions if x.type == "Failed")
    p = pods_of(c, "envjob")[0]
    assert reason == "PodFailurePolicy"
    assert message == f"Container main for pod default/{p.metadata.name} failed with exit code 3 matching FailJob rule at index 1"
    term = p.status.containerStatuses[0].state.terminated
    assert (term.exitCode, term.reason, term.message) == (3, "Error", "ValueError: bad learning rate")
    assert p.status.initContainerStatuses[0].state.terminated.reason == "Completed"
    out = list(c.log(p.metadata.name, container="main"))
    assert out[0] == f"fast AKIDEXAMPLE t0k {p.metadata.name} hi-fast 0\n"
    assert out[1] == '{"lr": "0.1"} {"lr": "0.1"}\n' and out[2] == "root read-only: True\n"


def test_fallback_to_logs_backoff_limit_and_deadline(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(job("crash", "print('first'); print('Traceback: boom', flush=True); raise SystemExit(1)", indexed=False,
                 backoff=1, container={"terminationMessagePolicy": "FallbackToLogsOnError"}))
    c.create(job("slow", "import time; time.sleep(60)", activeDeadlineSeconds=1, pod={"terminationGracePeriodSeconds": 1}))
    crash = wait_job(fake_k8s, c, "crash", "Failed")
    assert next(x.reason for x in crash.status.conditions if x.type == "Failed") == "BackoffLimitExceeded"
    assert crash.status.failed == 2 and len(pods_of(c, "crash")) == 2
    term = pods_of(c, "crash")[0].status.containerStatuses[0].state.terminated
    assert term.message == "first\nTraceback: boom\n"
    slow = wait_job(fake_k8s, c, "slow", "Failed", timeout=30)
    assert [x.reason for x in slow.status.conditions] == ["DeadlineExceeded", "DeadlineExceeded"]
    assert slow.status.active == 0


def test_two_hosts_resolve_each_other_through_the_headless_service(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    script = ("import os, socket, time\n"
              "me = int(os.environ['JOB_COMPLETION_INDEX']); peer = f'pair-{1 - me}.pair'\n"
              "for _ in range(200):\n"
              "    try:\n        print(socket.gethostname(), peer, socket.gethostbyname(peer), flush=True); break\n"
              "    except OSError:\n        time.sleep(0.05)\n"
              "else:\n    raise SystemExit('peer never resolved')\n")
    c.create(job("pair", script, completions=2, pod={"subdomain": "pair"}))
    # The headless Service may come after the pods: names appear once it exists, as with cluster DNS.
    fake_k8s.wait_for(lambda: len(pods_of(c, "pair")) == 2, what="both pods")
    c.create(from_dict({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "pair"},
                        "spec": {"clusterIP": "None", "selector": {"batch.kubernetes.io/job-name": "pair"}}}))
    wait_job(fake_k8s, c, "pair", "Complete")
    pods = pods_of(c, "pair")
    ips = [p.status.podIP for p in pods]
    assert len(set(ips)) == 2
    for i, p in enumerate(pods):
        assert list(c.log(p.metadata.name)) == [f"pair-{i} pair-{1 - i}.pair {ips[1 - i]}\n"]


def test_run_as_user_when_asked(tmp_path: Any) -> None:
    from k8s_fake import fake_cluster

    with fake_cluster(tmp_path / "k8s", run_as_user=True) as cluster:
        c = client(cluster)
        c.create(job("whoami", "", container={"command": ["sh", "-c", "id -u; id -g; touch /tmp/x 2>&1 || true"]},
                     pod={"securityContext": {"runAsUser": 1000, "runAsGroup": 2000}}))
        wait_job(cluster, c, "whoami", "Complete")
        assert list(c.log(pods_of(c, "whoami")[0].metadata.name)) == ["1000\n", "2000\n"]


def _log_or_none(c: Client, pod: str) -> list[str] | None:
    """The pod's log so far; None while its container is still being created (400, as Kubernetes)."""
    try:
        return list(c.log(pod))
    except ApiError:
        return None


def test_anchor_config_map_owns_everything_and_foreground_delete_cascades(fake_k8s: FakeCluster) -> None:
    """murphy's layout: a ConfigMap anchor owns the Secret and the Jobs; the Jobs own their pods."""
    c = client(fake_k8s)
    anchor = c.create(from_dict({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mt-x-cfg"}, "data": {}}))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "mt-x-cfg", "uid": anchor.metadata.uid,
           "blockOwnerDeletion": True, "controller": False}
    c.create(from_dict({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mt-x-s3", "ownerReferences": [ref]},
                        "stringData": {"K": "V"}}))
    # The pods ignore SIGTERM, so they outlive the delete by their grace period and the Jobs stay
    # visibly "deleting" meanwhile (pods that exit at once let a loaded machine's polling miss it).
    ignore_term = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    for name in ("mt-x", "mr-x"):
        j = job(name, ignore_term, pod={"terminationGracePeriodSeconds": 3})
        doc = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "ownerReferences": [ref]},
               "spec": j.spec.to_dict()}
        c.create(from_dict(doc))
    # "up" in the log, not phase Running: a pod is Running before its Python has set the handler.
    fake_k8s.wait_for(lambda: [_log_or_none(c, p.metadata.name) for p in c.list(Pod)] == [["up\n"]] * 2,
                      what="both pods up, ignoring SIGTERM")
    c.delete(type(anchor), "mt-x-cfg", cascade=CascadeType.FOREGROUND)
    cm = c.get(type(anchor), "mt-x-cfg")
    assert cm.metadata.deletionTimestamp and cm.metadata.finalizers == ["foregroundDeletion"]
    jobs = fake_k8s.wait_for(lambda: [j for j in c.list(Job) if j.metadata.deletionTimestamp] or None, what="Jobs deleting")
    assert all("foregroundDeletion" in j.metadata.finalizers for j in jobs)
    assert c.get(type(anchor), "mt-x-cfg").metadata.deletionTimestamp  # held while its Jobs are
    fake_k8s.wait_for(lambda: not fake_k8s.store.find("configmaps", "default", "mt-x-cfg"), timeout=30,
                      what="the anchor gone once everything it owns is gone")
    assert not list(c.list(Job)) and not list(c.list(Pod))
    assert fake_k8s.store.find("secrets", "default", "mt-x-s3") is None


def test_logs_options_and_logs_kept_until_the_pod_is_deleted(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(job("chatty", "import time\nfor i in range(4):\n    print('line', i, flush=True); time.sleep(0.2)"))
    done = wait_job(fake_k8s, c, "chatty", "Complete")
    assert done.status.succeeded == 1
    name = pods_of(c, "chatty")[0].metadata.name
    stamped = list(c.log(name, timestamps=True))
    assert [ln.split(" ", 1)[1] for ln in stamped] == [f"line {i}\n" for i in range(4)]
    since = stamped[2].split(" ", 1)[0]
    with urllib.request.urlopen(f"{fake_k8s.url}/api/v1/namespaces/default/pods/{name}/log?sinceTime={since}", timeout=10) as r:
        assert r.read().decode().splitlines() == ["line 2", "line 3"]
    assert list(c.log(name, since=3600)) == [f"line {i}\n" for i in range(4)]
    c.create(job("stuck", "print(1)", container={"image": "registry.example.com/missing:1"}))
    stuck = fake_k8s.wait_for(lambda: pods_of(c, "stuck"), what="the stuck pod")[0].metadata.name
    with pytest.raises(ApiError) as e:
        list(c.log(stuck))
    assert e.value.status.code == 400 and "is waiting to start" in e.value.status.message
    c.delete(Pod, name)
    fake_k8s.wait_for(lambda: not fake_k8s.store.find("pods", "default", name), what="the pod deleted")
    with pytest.raises(ApiError) as e:
        list(c.log(name))
    assert e.value.status.code == 404
    counts = fake_k8s.requests.snapshot()
    assert counts["GET pods/log"] >= 4 and counts["POST jobs"] == 2


def test_a_force_deleted_pod_counts_as_failed(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(job("forced", "import time; print('up', flush=True); time.sleep(60)"))
    pod = fake_k8s.wait_for(lambda: [p for p in pods_of(c, "forced") if p.status and p.status.phase == "Running"],
                            what="a running pod")[0].metadata.name
    c.delete(Pod, pod, grace_period=0)
    # Held only by the Job controller's finalizer until it has counted the pod.
    fake_k8s.wait_for(lambda: fake_k8s.store.find("pods", "default", pod) is None, what="the pod gone")
    failed = wait_job(fake_k8s, c, "forced", "Failed")
    assert failed.status.failed == 1 and not pods_of(c, "forced")
    assert next(x.reason for x in failed.status.conditions if x.type == "Failed") == "BackoffLimitExceeded"


def test_a_failing_init_container_fails_the_pod(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    init = {"name": "murphy-init", "image": PY, "terminationMessagePolicy": "FallbackToLogsOnError",
            "command": ["sh", "-c", "echo 'download failed: s3://nowhere/data' >&2; exit 2"]}
    c.create(job("badinit", "print('never')", pod={"initContainers": [init]}))
    wait_job(fake_k8s, c, "badinit", "Failed")
    p = pods_of(c, "badinit")[0]
    assert p.status.phase == "Failed"
    term = p.status.initContainerStatuses[0].state.terminated
    assert (term.exitCode, term.reason, term.message) == (2, "Error", "download failed: s3://nowhere/data\n")
    assert p.status.containerStatuses[0].state.waiting.reason == "PodInitializing"
    initialized = next(x for x in p.status.conditions if x.type == "Initialized")
    assert initialized.status == "False"


def test_native_sidecar_runs_beside_the_app_and_stops_after_it(fake_k8s: FakeCluster) -> None:
    """KEP-753: an init container with restartPolicy Always starts before the app containers, keeps
    running beside them, and gets SIGTERM once they are done (murphy-sync's final upload)."""
    c = client(fake_k8s)
    sync = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: (print('final upload', flush=True), sys.exit(0)))\n"
            "print('syncing', flush=True)\nwhile True: time.sleep(0.1)")
    sidecar = {"name": "murphy-sync", "image": PY, "restartPolicy": "Always", "command": ["python", "-c", sync]}
    # The app outlives the sidecar's start-up: a sidecar counts as started once its process runs
    # (no startupProbe), so an app that ends at once could stop it before its handler is set.
    app = "import time; time.sleep(3); print('training')"
    c.create(job("sidecar", app, pod={"initContainers": [sidecar], "terminationGracePeriodSeconds": 5}))
    done = wait_job(fake_k8s, c, "sidecar", "Complete")
    assert done.status.succeeded == 1
    p = pods_of(c, "sidecar")[0]
    assert p.status.phase == "Succeeded"
    assert list(c.log(p.metadata.name, container="murphy-sync")) == ["syncing\n", "final upload\n"]
    assert list(c.log(p.metadata.name, container="main")) == ["training\n"]
    side = p.status.initContainerStatuses[0].state.terminated
    assert side.exitCode == 0 and side.startedAt <= p.status.containerStatuses[0].state.terminated.startedAt
