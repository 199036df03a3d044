"""Multi-instance training jobs (issue 17 §1, §4) through the stock boto3 client against a real
``murphy server``, on the process and Docker runtimes.

A 2-host ``torch.distributed`` (gloo) job, launched with ``torchrun`` across ``algo-1`` and
``algo-2`` by the toolkit as SageMaker's does for ``sagemaker_torch_distributed_enabled``: each
host sees SageMaker's contract (resourceconfig.json, ``SM_*``), both workers' tensors are saved,
a NaN on rank 1 only is found by ExplodingTensor at that very step (every worker is read), and
both hosts are stopped; a loss that stops falling on rank 1 only is found by LossNotDecreasing on
worker_1 (a series rule follows each worker's own loss); a failing host fails the job with its own reason; logs stream per host;
the host cap is a ValidationException.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from test_control_plane import RULE_IMAGE, put_object, runtime, start_plane, watch  # noqa: F401 (fixture)

from murphy.trial import create_trial
from sourcetar import train_py_tarball

IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1.0-cpu-py310"
SCRIPT = Path(__file__).with_name("multi_instance_script.py")
GROUP = "/aws/sagemaker/TrainingJobs"


def put_source(server: Any) -> str:
    """The script as the job's ``sagemaker_submit_directory`` (as ``train.py``), in the plane's bucket."""
    put_object(server, "src/multi.tar.gz", train_py_tarball(SCRIPT.read_text()))
    return f"s3://{server.extra['bucket']}/src/multi.tar.gz"


def request_body(name: str, source: str, count: int = 2, **hps: str) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "HyperParameters": {"sagemaker_program": '"train.py"', "sagemaker_submit_directory": json.dumps(source),
                            "sagemaker_torch_distributed_enabled": "true", **hps},
        "OutputDataConfig": {"S3OutputPath": "s3://murphy-e2e/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": count, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        "DebugHookConfig": {
            "S3OutputPath": "s3://murphy-e2e/debug",
            "HookParameters": {"include_workers": "all", "save_interval": "1"},
            "CollectionConfigurations": [{"CollectionName": "gradients"}, {"CollectionName": "losses"}],
        },
        "DebugRuleConfigurations": [{"RuleConfigurationName": "ExplodingTensor", "RuleEvaluatorImage": RULE_IMAGE,
                                     "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}],
    }


def host_logs(server: Any, job: str) -> dict[str, str]:
    logs = server.client("logs")
    streams = logs.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix=f"{job}/")["logStreams"]
    out = {}
    for s in streams:
        events = logs.get_log_events(logGroupName=GROUP, logStreamName=s["logStreamName"], startFromHead=True)
        out[s["logStreamName"]] = "\n".join(e["message"] for e in events["events"])
    return out


def contracts(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("CONTRACT "):]) for line in text.splitlines() if line.startswith("CONTRACT ")]


def still_running(request: pytest.FixtureRequest, runtime: str, job: str) -> list[str]:  # noqa: F811
    """What of ``job`` runs, asked of the Docker engine or the OS (``/proc``: every process
    whose environment names the job), never of murphy."""
    if runtime == "docker":
        engine = request.getfixturevalue("docker_engine")
        found = engine.api.containers(filters={"label": f"io.murphy.job={job}"})  # type: ignore[attr-defined]
        return [f"{c['Names'][0]} {c['State']}" for c in found]
    wanted = {f"TRAINING_JOB_NAME={job}".encode(), f"MURPHY_JOB_NAME={job}".encode()}
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if set(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")) & wanted and \
                    Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:100].decode(errors="replace"))
        except OSError:  # it ended meanwhile
            continue
    return out


@pytest.mark.slow
def test_two_hosts_nan_on_rank_1_is_found_and_stops_both(request: pytest.FixtureRequest, make_server: Any,
                                                          monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:  # noqa: F811
    server = start_plane(request, make_server, monkeypatch, runtime, "local")
    client = server.client()
    name = "multi-nan"
    client.create_training_job(**request_body(name, put_source(server), **{"nan-rank": "1", "nan-step": "4"}))
    job, _ = watch(client, name, timeout=240)
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped"), (job, server.log()[-4000:])
    assert job["ResourceConfig"]["InstanceCount"] == 2
    rule = job["DebugRuleEvaluationStatuses"][0]
    assert rule["RuleEvaluationStatus"] == "IssuesFound", rule
    # Found at the NaN's own step, on rank 1: rank 0's tensors turn NaN only a step later.
    assert "at step 4 " in rule["StatusDetails"] and "on worker_1" in rule["StatusDetails"], rule["StatusDetails"]

    trial = create_trial(f"s3://murphy-e2e/debug/{name}/debug-output")
    assert trial.workers() == ["worker_0", "worker_1"]
    assert trial.num_workers == 2
    grads = trial.tensor_names(collection="gradients")
    assert grads and {w for s in trial.tensor(grads[0]).steps()[:4] for w in trial.tensor(grads[0]).workers(s)} == {
        "worker_0", "worker_1"}

    logs = host_logs(server, name)
    assert sorted(s.split("/")[1].rsplit("-", 1)[0] for s in logs) == ["algo-1", "algo-2"], list(logs)
    by_host = {}
    for stream, text in logs.items():
        (c,) = contracts(text)
        by_host[stream.split("/")[1].rsplit("-", 1)[0]] = c
    for i, host in enumerate(("algo-1", "algo-2")):
        c = by_host[host]
        assert (c["rank"], c["world"]) == (i, 2)
        rc = c["resourceconfig"]
        assert rc["current_host"] == host and rc["hosts"] == ["algo-1", "algo-2"]
        assert rc["current_instance_type"] == "ml.m5.xlarge" and rc["current_group_name"] == "homogeneousCluster"
        assert rc["instance_groups"] == [{"instance_group_name": "homogeneousCluster", "instance_type": "ml.m5.xlarge",
                                          "hosts": ["algo-1", "algo-2"]}]
        assert rc["network_interface_name"] == "eth0"
        env = c["env"]
        assert json.loads(env["SM_HOSTS"]) == ["algo-1", "algo-2"] and env["SM_CURRENT_HOST"] == host
        assert json.loads(env["SM_RESOURCE_CONFIG"]) == rc
        assert int(env["SM_NUM_CPUS"]) >= 1 and env["SM_NUM_GPUS"] == "0"
        assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"]) == (str(i), "2", "0")
    assert by_host["algo-1"]["env"]["MASTER_PORT"] == by_host["algo-2"]["env"]["MASTER_PORT"]
    assert still_running(request, runtime, name) == []  # both hosts (and the rule) ended before Stopped


@pytest.mark.slow
def test_two_hosts_a_flat_loss_on_rank_1_is_found_on_worker_1(request: pytest.FixtureRequest, make_server: Any,
                                                               monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:  # noqa: F811
    server = start_plane(request, make_server, monkeypatch, runtime, "local")
    client = server.client()
    name = "multi-flat"
    body = request_body(name, put_source(server), **{"flat-loss-rank": "1"})
    body["DebugRuleConfigurations"] = [{"RuleConfigurationName": "LossNotDecreasing", "RuleEvaluatorImage": RULE_IMAGE,
                                        "RuleParameters": {"rule_to_invoke": "LossNotDecreasing"}}]
    client.create_training_job(**body)
    job, _ = watch(client, name, timeout=240)
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped"), (job, server.log()[-4000:])
    rule = job["DebugRuleEvaluationStatuses"][0]
    assert rule["RuleEvaluationStatus"] == "IssuesFound", rule
    # worker_0's loss fell at every step: a finding there (or one mixing both series) is wrong.
    assert "on worker_1" in rule["StatusDetails"] and "worker_0" not in rule["StatusDetails"], rule["StatusDetails"]
    trial = create_trial(f"s3://murphy-e2e/debug/{name}/debug-output")
    loss = trial.tensor(trial.tensor_names(collection="losses")[0])
    first = loss.steps()[0]
    assert float(loss.value(first, worker="worker_1")) == 1.0
    # The stop can land between the two ranks' writes of a step: compare at worker_0's own last one.
    last0 = [s for s in loss.steps() if "worker_0" in loss.workers(s)][-1]
    assert float(loss.value(last0, worker="worker_0")) < float(loss.value(first, worker="worker_0"))
    assert still_running(request, runtime, name) == []


@pytest.mark.slow
def test_a_failing_host_fails_the_job_with_its_reason(request: pytest.FixtureRequest, make_server: Any,
                                                      monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:  # noqa: F811
    server = start_plane(request, make_server, monkeypatch, runtime, "local")
    client = server.client()
    body = request_body("multi-fail", put_source(server), **{"fail-rank": "1", "fail-step": "3"})
    body.pop("DebugRuleConfigurations")
    client.create_training_job(**body)
    job, _ = watch(client, "multi-fail", timeout=240)
    assert job["TrainingJobStatus"] == "Failed", (job, server.log()[-4000:])
    assert job["FailureReason"].endswith("(algo-2)"), job["FailureReason"]
    assert "RuntimeError: rank 1 gave up at step 3" in job["FailureReason"], job["FailureReason"]
    assert still_running(request, runtime, "multi-fail") == []  # algo-1 was stopped with it
    described = client.list_training_jobs()["TrainingJobSummaries"]
    assert [j["TrainingJobName"] for j in described].count("multi-fail") == 1


def test_more_hosts_than_the_runtime_allows_is_a_validation_error(make_server: Any) -> None:
    server = make_server("--runtime", "process", env={"MURPHY_MAX_INSTANCES_PROCESS": "3"})
    client = server.client()
    with pytest.raises(ClientError) as e:
        client.create_training_job(**request_body("too-many", "s3://murphy-e2e/src/x.tar.gz", count=4))
    assert e.value.response["Error"]["Code"] == "ValidationException"
    assert "InstanceCount 4 exceeds the limit of 3 hosts" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError):
        client.describe_training_job(TrainingJobName="too-many")
