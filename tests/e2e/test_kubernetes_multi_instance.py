"""A 2-host ``torch.distributed`` (gloo) job on the Kubernetes runtime, black-box: the stock boto3
client → ``murphy server --runtime kubernetes`` → lightkube → murphy's fake API server, whose Job
controller makes the two pods of the one Indexed Job from its one template and whose kubelet runs
them as local processes, each with its own hostname ``<job>-<i>`` and address, finding the other
through the headless Service (issue 17 §1, §4).

The training script is the one the process and Docker runtimes run (``multi_instance_script.py``,
``tests/e2e/test_multi_instance.py``): each pod sees its own host (``SM_CURRENT_HOST``,
``SM_TRAINING_ENV``, ``resourceconfig.json``) though both were made from one template, both
workers' tensors are saved, a NaN on rank 1 only is found by ExplodingTensor at that step, the
training Job is deleted with both pods and the job ends Stopped; a failing host fails the job
with ``(algo-2)`` in the reason.
"""

# ruff: noqa: F811 (the fixture parameter redefines the imported fixture)
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import test_multi_instance as multi
from test_kubernetes_runtime_e2e import cluster, murphy_jobs, start, watch  # noqa: F401 (fixture)

from murphy.runtimes.kubernetes_fake import FakeCluster
from murphy.trial import create_trial
from sourcetar import train_py_tarball


def two_host_request(name: str, bucket: str, **hps: str) -> dict[str, Any]:
    """The multi-instance tests' request, in this test's bucket, the "image"'s own PATH leading
    to this venv's Python (torch, murphy)."""
    from murphy.storage import open_store

    open_store(f"s3://{bucket}").put("src/multi.tar.gz", train_py_tarball(multi.SCRIPT.read_text()))
    body = multi.request_body(name, f"s3://{bucket}/src/multi.tar.gz", **hps)
    body = json.loads(json.dumps(body).replace('s3://murphy-e2e/', f"s3://{bucket}/"))
    body["Environment"] = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return dict(body)


def wait_gone(cluster: FakeCluster, timeout: float = 60.0) -> None:
    """The training Job deleted, with its pods, and (the job being over) every murphy Job."""
    deadline = time.monotonic() + timeout
    while murphy_jobs(cluster) or any(True for _ in cluster.store.iter_all("pods")):
        assert time.monotonic() < deadline, ([j["metadata"]["name"] for j in murphy_jobs(cluster)],
                                             [p["metadata"]["name"] for p in cluster.store.iter_all("pods")])
        time.sleep(0.2)


def training_job(cluster: FakeCluster) -> dict[str, Any] | None:
    found = [j for j in murphy_jobs(cluster) if j["metadata"]["labels"].get("murphy.io/role") == "training"]
    assert len(found) <= 1, [j["metadata"]["name"] for j in found]
    return found[0] if found else None


@pytest.mark.slow
def test_two_pods_nan_on_rank_1_is_found_and_both_are_stopped(make_server: Any, monkeypatch: pytest.MonkeyPatch,
                                                              request: pytest.FixtureRequest, cluster: FakeCluster) -> None:
    server = start(make_server, monkeypatch, request, cluster)
    client, bucket = server.client(), server.extra["bucket"]
    name = "k8s-multi-nan"
    client.create_training_job(**two_host_request(name, bucket, **{"nan-rank": "1", "nan-step": "4"}))
    made = cluster.wait_for(lambda: training_job(cluster), timeout=120, what="the training Job")
    job_name = made["metadata"]["name"]
    assert (made["spec"]["completionMode"], made["spec"]["completions"]) == ("Indexed", 2)
    job = watch(client, name, timeout=300)
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped"), (job, server.log()[-4000:])
    assert job["ResourceConfig"]["InstanceCount"] == 2
    rule = job["DebugRuleEvaluationStatuses"][0]
    assert rule["RuleEvaluationStatus"] == "IssuesFound", rule
    assert "at step 4 " in rule["StatusDetails"] and "on worker_1" in rule["StatusDetails"], rule["StatusDetails"]
    wait_gone(cluster)
    assert multi.still_running(request, "process", name) == []  # both pods' processes (and the rule's) ended

    trial = create_trial(f"s3://{bucket}/debug/{name}/debug-output")
    assert trial.workers() == ["worker_0", "worker_1"]
    grads = trial.tensor_names(collection="gradients")
    assert grads and {w for s in trial.tensor(grads[0]).steps()[:4] for w in trial.tensor(grads[0]).workers(s)} == {
        "worker_0", "worker_1"}

    logs = multi.host_logs(server, name)
    assert sorted(s.split("/")[1].rsplit("-", 1)[0] for s in logs) == ["algo-1", "algo-2"], list(logs)
    by_host = {}
    for stream, text in logs.items():
        (c,) = multi.contracts(text)
        by_host[stream.split("/")[1].rsplit("-", 1)[0]] = c
    for i, host in enumerate(("algo-1", "algo-2")):
        c = by_host[host]
        assert (c["rank"], c["world"]) == (i, 2)
        assert c["hostname"] == f"{job_name}-{i}"  # the Job controller's, per index
        rc = c["resourceconfig"]
        assert rc["current_host"] == host and rc["hosts"] == ["algo-1", "algo-2"]
        env = c["env"]
        # One pod template for both, yet each program sees its own host.
        assert env["SM_CURRENT_HOST"] == host and json.loads(env["SM_HOSTS"]) == ["algo-1", "algo-2"]
        assert json.loads(env["SM_RESOURCE_CONFIG"]) == rc
        training_env = json.loads(env["SM_TRAINING_ENV"])
        assert (training_env["current_host"], training_env["is_master"]) == (host, i == 0)
        assert training_env["resource_config"] == rc
        assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"]) == (str(i), "2", "0")
        # torchrun's rendezvous at algo-1's pod, by its name through the headless Service.
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == (f"{job_name}-0.{job_name}", "7777")
        # algo-<k> resolves for the program through HOSTALIASES: each host's pod, fully qualified
        # with the tail of this pod's own FQDN (the fake kubelet's hosts file, as the kubelet's).
        tail = r"\.[a-z0-9-]+\.svc\.cluster\.local"
        job = re.escape(job_name)
        assert re.fullmatch(f"algo-1 {job}-0\\.{job}{tail}\nalgo-2 {job}-1\\.{job}{tail}\n",
                            c["hostaliases"] or ""), c["hostaliases"]


@pytest.mark.slow
def test_a_failing_pod_fails_the_job_with_its_hosts_reason(make_server: Any, monkeypatch: pytest.MonkeyPatch,
                                                         request: pytest.FixtureRequest, cluster: FakeCluster) -> None:
    server = start(make_server, monkeypatch, request, cluster)
    client, bucket = server.client(), server.extra["bucket"]
    body = two_host_request("k8s-multi-fail", bucket, **{"fail-rank": "1", "fail-step": "3"})
    body.pop("DebugRuleConfigurations")
    client.create_training_job(**body)
    job = watch(client, "k8s-multi-fail", timeout=300)
    assert job["TrainingJobStatus"] == "Failed", (job, server.log()[-4000:])
    assert job["FailureReason"].endswith("(algo-2)"), job["FailureReason"]
    assert "RuntimeError: rank 1 gave up at step 3" in job["FailureReason"], job["FailureReason"]
    wait_gone(cluster)
    assert multi.still_running(request, "process", "k8s-multi-fail") == []  # algo-1's pod was stopped with it
