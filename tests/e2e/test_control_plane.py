"""Issue #4's acceptance: the stock boto3 client against a real ``murphy server`` process.

The seed scenario (lr=100, inputs scaled by 1e11) must end Stopped with ExplodingTensor
IssuesFound; the healthy twin (lr=0.001, scale=1) must end Completed with NoIssuesFound. Tensors
live on a local directory per bucket (the embedded default) and on a real S3 server (SeaweedFS).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from murphy.trial import create_trial
from sourcetar import train_py_tarball

RULE_IMAGE = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"
DEMO_IMAGE = "murphy/linear-regression-demo:latest"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
EXPLODING = {"lr": "100", "scale": "100000000000", "steps": "10", "debug_frequency": "1"}
HEALTHY = {"lr": "0.001", "scale": "1", "steps": "10", "debug_frequency": "1"}
TERMINAL = {"Completed", "Failed", "Stopped"}


def job_request(name: str, bucket: str, hyperparameters: dict[str, str], **extra: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": DEMO_IMAGE, "TrainingInputMode": "File"},
        "RoleArn": ROLE,
        "HyperParameters": hyperparameters,
        "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        "DebugHookConfig": {"S3OutputPath": f"s3://{bucket}/debug", "CollectionConfigurations": []},
        "DebugRuleConfigurations": [
            {"RuleConfigurationName": "ExplodingTensor", "RuleEvaluatorImage": RULE_IMAGE,
             "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}
        ],
    }
    request.update(extra)
    return request


def watch(client: Any, name: str, timeout: float = 120.0) -> tuple[dict[str, Any], list[str]]:
    """Describe until terminal; return the last body and every rule status seen, in order."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.describe_training_job(TrainingJobName=name)
        for rule in job.get("DebugRuleEvaluationStatuses", []):
            if not seen or seen[-1] != rule["RuleEvaluationStatus"]:
                seen.append(rule["RuleEvaluationStatus"])
        if job["TrainingJobStatus"] in TERMINAL:
            return job, seen
        time.sleep(0.05)
    raise AssertionError(f"{name} did not end within {timeout} s: {job['TrainingJobStatus']} / {job['SecondaryStatus']}")


RUNTIMES = [pytest.param("process"), pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture(params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> str:
    """The same black-box tests run on local processes and on Docker containers."""
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    return str(request.param)


def start_plane(request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch, runtime: str,
                store: str, data_dir: Any = None, bucket: str | None = None, endpoint_args: Any = None) -> Any:
    """A ``murphy server`` with ``runtime`` and its buckets on ``store``; ``data_dir``, ``bucket``
    and ``endpoint_args`` restart an earlier one (same data, same bucket, same arguments)."""
    if endpoint_args is not None:
        server = make_server(*endpoint_args, data_dir=data_dir,
                             env=request.getfixturevalue("seaweedfs_server").env() if store == "s3" else None)
        server.extra["bucket"] = bucket
        return server
    runtime_args = ("--runtime", runtime)
    if store == "local":
        server = make_server(*runtime_args, data_dir=data_dir)
        monkeypatch.setenv("MURPHY_S3_LOCAL_ROOT", str(server.data_dir / "buckets"))
        server.extra["bucket"] = "murphy-e2e"
        return server
    import servers

    s3 = request.getfixturevalue("seaweedfs_server")
    bucket = servers.new_bucket(s3)
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    server = make_server(*runtime_args, "--object-store", "s3", "--s3-endpoint-url", s3.endpoint_url, env=s3.env(),
                         data_dir=data_dir)
    server.extra["bucket"] = bucket
    return server


@pytest.fixture(params=["local", "s3"])
def plane(request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch, runtime: str) -> Any:
    return start_plane(request, make_server, monkeypatch, runtime, request.param)


def put_object(plane: Any, key: str, body: bytes) -> None:
    """An object in the plane's bucket, wherever its store is."""
    bucket = plane.extra["bucket"]
    if bucket == "murphy-e2e":
        path = plane.data_dir / "buckets" / bucket / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    else:
        from murphy.storage import open_store

        open_store(f"s3://{bucket}").put(key, body)


@pytest.mark.slow
def test_seed_scenario_is_stopped_by_exploding_tensor(plane: Any) -> None:
    client, bucket = plane.client(), plane.extra["bucket"]
    arn = client.create_training_job(**job_request("seed-exploding", bucket, EXPLODING))["TrainingJobArn"]
    assert arn == "arn:aws:sagemaker:us-west-2:123456789012:training-job/seed-exploding"
    first = client.describe_training_job(TrainingJobName="seed-exploding")
    assert first["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "InProgress"

    job, seen = watch(client, "seed-exploding")
    assert seen[0] == "InProgress" and seen[-1] == "IssuesFound", seen
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped"), plane.log()[-3000:]
    rule = job["DebugRuleEvaluationStatuses"][0]
    assert "ExplodingTensor" in rule["StatusDetails"] and "step" in rule["StatusDetails"]
    assert "ExplodingTensor" in job["SecondaryStatusTransitions"][-1]["StatusMessage"]
    assert all("StatusMessage" in t for t in job["SecondaryStatusTransitions"])

    # The gradients are there to read back, as in the seed article.
    trial = create_trial(f"s3://{bucket}/debug/seed-exploding/debug-output")
    assert trial.training_has_ended()
    gradients = trial.tensor_names(collection="gradients")
    assert gradients == ["gradient/LinearRegression_weight"]
    assert trial.tensor(gradients[0]).steps()[:3] == [0, 1, 2]


@pytest.mark.slow
def test_healthy_twin_completes_with_no_issues(plane: Any) -> None:
    client, bucket = plane.client(), plane.extra["bucket"]
    client.create_training_job(**job_request("seed-healthy", bucket, HEALTHY))
    job, seen = watch(client, "seed-healthy")
    assert seen[-1] == "NoIssuesFound", seen
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Completed", "Completed"), plane.log()[-3000:]
    assert job["TrainingTimeInSeconds"] >= 1
    assert [t["Status"] for t in job["SecondaryStatusTransitions"]][-1] == "Completed"
    assert job["ModelArtifacts"]["S3ModelArtifacts"] == f"s3://{bucket}/output/seed-healthy/output/model.tar.gz"
    logs = plane.client("logs")
    streams = logs.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix="seed-healthy/")["logStreams"]
    assert len(streams) == 1 and streams[0]["logStreamName"].startswith("seed-healthy/algo-1-")
    events = logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=streams[0]["logStreamName"], startFromHead=True)
    assert any(e["message"].startswith("Step=9") for e in events["events"])




SLOW_SCRIPT = """
import time, sys
for i in range(int(sys.argv[sys.argv.index('--ticks') + 1])):
    print(f"tick {i}", flush=True)
    time.sleep(0.2)
"""


@pytest.mark.slow
@pytest.mark.parametrize("store", ["local", "s3"])
def test_kill_9_the_server_mid_job_loses_nothing(request: pytest.FixtureRequest, make_server: Any,
                                                 monkeypatch: pytest.MonkeyPatch, runtime: str, store: str) -> None:
    server = start_plane(request, make_server, monkeypatch, runtime, store)
    bucket = server.extra["bucket"]
    put_object(server, "src/sourcedir.tar.gz", train_py_tarball(SLOW_SCRIPT))
    client = server.client()
    body = job_request("survives-restart", bucket, {
        "ticks": "25", "sagemaker_program": '"train.py"',
        "sagemaker_submit_directory": f'"s3://{bucket}/src/sourcedir.tar.gz"'})
    body["AlgorithmSpecification"]["TrainingImage"] = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
    body.pop("DebugRuleConfigurations")
    client.create_training_job(**body)
    deadline = time.monotonic() + 60
    while client.describe_training_job(TrainingJobName="survives-restart")["SecondaryStatus"] != "Training":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    server.kill()
    restarted = start_plane(request, make_server, monkeypatch, runtime, store, data_dir=server.data_dir,
                            bucket=bucket, endpoint_args=server.args)
    client = restarted.client()
    during = client.describe_training_job(TrainingJobName="survives-restart")
    assert during["TrainingJobStatus"] == "InProgress"
    job, _ = watch(client, "survives-restart", timeout=90)
    assert job["TrainingJobStatus"] == "Completed", restarted.log()[-3000:]
    # The job's tensor mirror kept going through the restart: every tick's output is in the store.
    from murphy.storage import open_store

    end = open_store(f"s3://{bucket}/debug/survives-restart/debug-output")
    assert end.exists("training_job_end.ts")


@pytest.mark.slow
def test_work_that_died_while_the_server_was_down_is_marked_failed(make_server: Any, runtime: str) -> None:
    from murphy_server import kill_job_containers, kill_job_processes

    server = make_server("--runtime", runtime)
    buckets = server.data_dir / "buckets"
    (buckets / "src").mkdir(parents=True, exist_ok=True)
    (buckets / "src" / "sourcedir.tar.gz").write_bytes(train_py_tarball(SLOW_SCRIPT))
    client = server.client()
    request = job_request("dies-meanwhile", "murphy-e2e", {
        "ticks": "200", "sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://src/sourcedir.tar.gz"'})
    request["AlgorithmSpecification"]["TrainingImage"] = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
    client.create_training_job(**request)
    deadline = time.monotonic() + 30
    while client.describe_training_job(TrainingJobName="dies-meanwhile")["SecondaryStatus"] != "Training":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    server.kill()
    if runtime == "docker":
        assert kill_job_containers(server.data_dir) == 2  # the training container and the rule's
    else:
        kill_job_processes(server.data_dir)
    restarted = make_server("--runtime", runtime, data_dir=server.data_dir)
    job, _ = watch(restarted.client(), "dies-meanwhile", timeout=60)
    assert job["TrainingJobStatus"] == "Failed", restarted.log()[-3000:]
    assert "vanished" in job["FailureReason"] or "killed" in job["FailureReason"], job["FailureReason"]
    # The rule judged what was saved and then finished: nothing is left InProgress.
    assert job["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] in ("NoIssuesFound", "Error", "Stopped")


FAILING_SCRIPT = """
import os, sys
print("about to fail", flush=True)
with open(os.path.join(os.environ["SM_OUTPUT_DIR"], "failure"), "w") as f:
    f.write("ValueError: the learning rate is not a number")
sys.exit(1)
"""

CRASHING_RULE = """
import os
from smdebug.rules.rule import Rule


class CrashingRule(Rule):
    def __init__(self, base_trial):
        super().__init__(base_trial)

    def invoke_at_step(self, step):
        print("crashing at step", step, flush=True)
        os._exit(7)
"""


@pytest.mark.slow
def test_training_that_exits_1_with_a_failure_file_fails_the_job_with_its_reason(
        request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:
    server = start_plane(request, make_server, monkeypatch, runtime, "local")
    put_object(server, "src/fail.tar.gz", train_py_tarball(FAILING_SCRIPT))
    client = server.client()
    request_body = job_request("exits-1", "murphy-e2e", {
        "sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://murphy-e2e/src/fail.tar.gz"'})
    request_body["AlgorithmSpecification"]["TrainingImage"] = (
        "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310")
    request_body.pop("DebugRuleConfigurations")
    client.create_training_job(**request_body)
    job, _ = watch(client, "exits-1", timeout=120)
    assert job["TrainingJobStatus"] == "Failed", server.log()[-3000:]
    assert "ValueError: the learning rate is not a number" in job["FailureReason"], job["FailureReason"]


@pytest.mark.slow
def test_a_crashing_rule_container_is_error_and_training_goes_on(
        request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:
    server = start_plane(request, make_server, monkeypatch, runtime, "local")
    put_object(server, "rules/crash.py", CRASHING_RULE.encode())
    client = server.client()
    body = job_request("rule-crash", "murphy-e2e", HEALTHY)
    body["DebugRuleConfigurations"] = [{
        "RuleConfigurationName": "Crashes",
        "RuleEvaluatorImage": "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rule-evaluator:latest",
        "RuleParameters": {"rule_to_invoke": "CrashingRule", "source_s3_uri": "s3://murphy-e2e/rules/crash.py"},
    }]
    client.create_training_job(**body)
    job, _ = watch(client, "rule-crash", timeout=120)
    rule = job["DebugRuleEvaluationStatuses"][0]
    assert rule["RuleEvaluationStatus"] == "Error", rule
    assert "exited with code 7" in rule["StatusDetails"], rule["StatusDetails"]
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Completed", "Completed"), server.log()[-3000:]
