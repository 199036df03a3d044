"""The Kubernetes runtime end to end, black-box: the stock boto3 client → a real ``murphy server
--runtime kubernetes`` process → lightkube over HTTP → murphy's fake Kubernetes API server
(``murphy.runtimes.kubernetes_fake``: Job controller, garbage collector, a kubelet running the
pods' containers as local processes) → the real training and rule programs, tensors in a real
S3 server (SeaweedFS).

- a NaN found by ExplodingTensor stops the job: the training Job is deleted, the job Stopped;
- a ``kill -9`` of murphy while the job trains, then log rotations ending the follow streams: the
  restarted one re-attaches from the handle and the job completes, its log through the
  CloudWatch Logs API whole and without duplicates;
- an image that cannot be pulled, a container OOMKilled and a pod that stays unschedulable (the
  fake's fault injection) fail the job with SageMaker's FailureReason.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from k8s_fake import TEST_IMAGES, fake_cluster
from murphy.runtimes.kubernetes_fake import FakeCluster
from sourcetar import train_py_tarball

RULE_IMAGE = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"
DEMO_IMAGE = "murphy/linear-regression-demo:latest"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
EXPLODING = {"lr": "100", "scale": "100000000000", "steps": "3000", "debug_frequency": "1"}
TERMINAL = {"Completed", "Failed", "Stopped"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeCluster]:
    # The pods run as the test's own user: the venv's interpreter need not be readable by uid
    # 1000 here (a real cluster runs murphy's images as their non-root user).
    # murphy's training images run the toolkit (their Dockerfiles' ENTRYPOINT), which runs the
    # catalog's command with the job's hyperparameters and mirrors the tensors to S3.
    images = {**TEST_IMAGES, "murphy/linear-regression-demo:*": ["python3", "-m", "murphy.container"]}
    with fake_cluster(tmp_path / "fake-k8s", run_as_user=False, images=images) as c:
        yield c


def start(make_server: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, cluster: FakeCluster,
          *extra: str, data_dir: Path | None = None, env: dict[str, str] | None = None) -> Any:
    import servers

    s3 = request.getfixturevalue("seaweedfs_server")
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    server = make_server("--runtime", "kubernetes", "--kubeconfig", cluster.kubeconfig,
                         "--object-store", "s3", "--s3-endpoint-url", s3.endpoint_url, *extra,
                         env={**s3.env(), "MURPHY_KUBERNETES_POLL_INTERVAL_S": "0.2", **(env or {})}, data_dir=data_dir)
    server.extra["bucket"] = servers.new_bucket(s3)
    return server


def job_request(name: str, bucket: str, hyperparameters: dict[str, str], rules: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": DEMO_IMAGE, "TrainingInputMode": "File"},
        "RoleArn": ROLE, "HyperParameters": hyperparameters,
        "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        "DebugHookConfig": {"S3OutputPath": f"s3://{bucket}/debug", "CollectionConfigurations": []},
        # The "image"'s own PATH: its python is the one with murphy and torch (this venv's).
        "Environment": {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
    }
    if rules:
        body["DebugRuleConfigurations"] = [{"RuleConfigurationName": "ExplodingTensor", "RuleEvaluatorImage": RULE_IMAGE,
                                            "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}]
    body.update(extra)
    return body


def watch(client: Any, name: str, timeout: float = 180.0, until: set[str] = TERMINAL) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = client.describe_training_job(TrainingJobName=name)
        if job["TrainingJobStatus"] in until or job["SecondaryStatus"] in until:
            return job
        assert time.monotonic() < deadline, f"{name}: {job['TrainingJobStatus']} / {job['SecondaryStatus']}"
        time.sleep(0.2)


def murphy_jobs(cluster: FakeCluster) -> list[dict[str, Any]]:
    return [j for j in cluster.store.iter_all("jobs")
            if (j["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "murphy"]


def log_messages(server: Any, job: str) -> list[str]:
    logs = server.client("logs")
    streams = logs.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=job)["logStreams"]
    assert streams, "no log stream"
    events = logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=streams[0]["logStreamName"],
                                 startFromHead=True)["events"]
    return [e["message"] for e in events]


@pytest.mark.slow
def test_a_finding_deletes_the_training_job_and_the_job_stops(make_server: Any, monkeypatch: pytest.MonkeyPatch,
                                                             request: pytest.FixtureRequest, cluster: FakeCluster) -> None:
    server = start(make_server, monkeypatch, request, cluster)
    client, bucket = server.client(), server.extra["bucket"]
    client.create_training_job(**job_request("k8s-exploding", bucket, EXPLODING))
    job = watch(client, "k8s-exploding")
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped"), server.log()[-3000:]
    rule = job["DebugRuleEvaluationStatuses"][0]
    assert rule["RuleEvaluationStatus"] == "IssuesFound" and "ExplodingTensor" in rule["StatusDetails"]
    # The training Job was deleted (Foreground, with its pods) and, once terminal, every object.
    deadline = time.monotonic() + 30
    while murphy_jobs(cluster) or any(True for _ in cluster.store.iter_all("pods")):
        assert time.monotonic() < deadline, [j["metadata"]["name"] for j in murphy_jobs(cluster)]
        time.sleep(0.2)
    # The log outlived its pod: served by murphy's store through the CloudWatch Logs API.
    messages = log_messages(server, "k8s-exploding")
    assert any(m.startswith("Step=0") for m in messages), messages[-20:]
    assert len(messages) == len(set(messages)) or sorted(messages) == sorted(set(messages)), "duplicated lines"


def job_keys_of(data_dir: Path) -> list[str]:
    from test_kubernetes_s3_isolation import job_keys

    return job_keys(data_dir)


SLOW_SCRIPT = """
import time, sys
for i in range(int(sys.argv[sys.argv.index('--ticks') + 1])):
    print(f"tick {i}", flush=True)
    time.sleep(0.25)
"""




@pytest.mark.slow
def test_murphy_restarted_mid_job_reattaches_without_duplicate_logs(make_server: Any, monkeypatch: pytest.MonkeyPatch,
                                                                   request: pytest.FixtureRequest, cluster: FakeCluster) -> None:
    from murphy.storage import open_store

    server = start(make_server, monkeypatch, request, cluster)
    client, bucket = server.client(), server.extra["bucket"]
    open_store(f"s3://{bucket}").put("src/sourcedir.tar.gz", train_py_tarball(SLOW_SCRIPT))
    body = job_request("k8s-restart", bucket, {"ticks": "60", "sagemaker_program": '"train.py"',
                                               "sagemaker_submit_directory": f'"s3://{bucket}/src/sourcedir.tar.gz"'},
                       rules=False)
    body["AlgorithmSpecification"]["TrainingImage"] = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
    client.create_training_job(**body)
    watch(client, "k8s-restart", until={"Training"}, timeout=120)
    deadline = time.monotonic() + 60
    while not any(m.startswith("tick 3") for m in log_messages(server, "k8s-restart")):
        assert time.monotonic() < deadline, server.log()[-2000:]
        time.sleep(0.2)
    uids = [j["metadata"]["uid"] for j in murphy_jobs(cluster)]
    issued = job_keys_of(server.data_dir)
    server.kill()
    time.sleep(1.0)  # the pod goes on printing while murphy is down
    restarted = start(make_server, monkeypatch, request, cluster, data_dir=server.data_dir)
    restarted.extra["bucket"] = bucket
    client = restarted.client()
    assert client.describe_training_job(TrainingJobName="k8s-restart")["TrainingJobStatus"] == "InProgress"
    for _ in range(3):  # log rotations (or API server restarts) end the follow streams: reconnected
        time.sleep(1.5)
        cluster.kubelet.rotate_logs()
    job = watch(client, "k8s-restart")
    assert job["TrainingJobStatus"] == "Completed", (job.get("FailureReason"), restarted.log()[-3000:])
    assert len(uids) == 1  # one Job, adopted by the restarted murphy, never re-created
    ticks = [m for m in log_messages(restarted, "k8s-restart") if m.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(60)], ticks
    # The pod's S3 key, issued by the first murphy, was revoked by the restarted one.
    assert issued == ["k8s-restart-training"]
    deadline = time.monotonic() + 30
    while "k8s-restart-training" in job_keys_of(restarted.data_dir):
        assert time.monotonic() < deadline, job_keys_of(restarted.data_dir)
        time.sleep(0.3)


def test_an_image_that_cannot_be_pulled_fails_the_job(make_server: Any, monkeypatch: pytest.MonkeyPatch,
                                                     request: pytest.FixtureRequest, cluster: FakeCluster) -> None:
    server = start(make_server, monkeypatch, request, cluster, env={"MURPHY_KUBERNETES_IMAGE_PULL_TIMEOUT_S": "2"})
    client, bucket = server.client(), server.extra["bucket"]
    body = job_request("k8s-no-image", bucket, {"sagemaker_program": '"train.py"'}, rules=False)
    body["AlgorithmSpecification"]["TrainingImage"] = "registry.example.com/acme/missing:1"
    client.create_training_job(**body)
    job = watch(client, "k8s-no-image", timeout=90)
    assert job["TrainingJobStatus"] == "Failed", server.log()[-3000:]
    assert job["FailureReason"].startswith("ClientError: Failed to pull image registry.example.com/acme/missing:1"), job["FailureReason"]
    assert os.path.isdir(server.data_dir / "containers")


def test_an_oom_killed_training_container_fails_with_out_of_memory(make_server: Any, monkeypatch: pytest.MonkeyPatch,
                                                                  request: pytest.FixtureRequest, cluster: FakeCluster) -> None:
    from murphy.storage import open_store

    # The kubelet kills the training container for its memory limit 1 s after it started.
    cluster.faults.add("OOMKilled", selector="murphy.io/role=training", container="algo", after_s=1.0)
    server = start(make_server, monkeypatch, request, cluster)
    client, bucket = server.client(), server.extra["bucket"]
    open_store(f"s3://{bucket}").put("src/sourcedir.tar.gz", train_py_tarball(SLOW_SCRIPT))
    body = job_request("k8s-oom", bucket, {"ticks": "200", "sagemaker_program": '"train.py"',
                                           "sagemaker_submit_directory": f'"s3://{bucket}/src/sourcedir.tar.gz"'},
                       rules=False)
    body["AlgorithmSpecification"]["TrainingImage"] = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
    client.create_training_job(**body)
    job = watch(client, "k8s-oom", timeout=120)
    assert job["TrainingJobStatus"] == "Failed", server.log()[-3000:]
    assert job["FailureReason"].startswith("OutOfMemoryError: Please use an instance type with more memory"), job["FailureReason"]


def test_an_unschedulable_job_fails_with_the_scheduler_s_message(make_server: Any, monkeypatch: pytest.MonkeyPatch,
                                                                 request: pytest.FixtureRequest, cluster: FakeCluster) -> None:
    cluster.faults.add("Unschedulable", selector="murphy.io/role=training")
    server = start(make_server, monkeypatch, request, cluster, env={"MURPHY_KUBERNETES_SCHEDULING_TIMEOUT_S": "2"})
    client, bucket = server.client(), server.extra["bucket"]
    client.create_training_job(**job_request("k8s-unschedulable", bucket, {"steps": "5"}, rules=False))
    job = watch(client, "k8s-unschedulable", timeout=90)
    assert job["TrainingJobStatus"] == "Failed", server.log()[-3000:]
    assert job["FailureReason"].startswith("CapacityError: Unable to provision requested ML compute capacity: 0/1 nodes"), \
        job["FailureReason"]
    assert not murphy_jobs(cluster) or all(j["metadata"].get("deletionTimestamp") for j in murphy_jobs(cluster))
