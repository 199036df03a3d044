"""The supervisor's reconcile logic, driven step by step with the fake runtime and store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from murphy.exceptions import ValidationException
from murphy.jobs.plans import open_uri
from murphy.jobs.service import JobService
from murphy.jobs.supervisor import Supervisor
from murphy.runtimes.base import ContainerState
from murphy.runtimes.fake import FakeRuntime
from murphy.settings import Settings
from murphy.store.memory import InMemoryJobStore

RULE_IMAGE = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def request(name: str = "job-1", rules: int = 1, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "murphy/linear-regression-demo:latest", "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/R",
        "OutputDataConfig": {"S3OutputPath": "s3://b/out"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "DebugHookConfig": {"S3OutputPath": "s3://b/debug"},
        "DebugRuleConfigurations": [
            {"RuleConfigurationName": f"Rule{i}", "RuleEvaluatorImage": RULE_IMAGE,
             "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}
            for i in range(rules)
        ],
    }
    body.update(extra)
    return body


class Harness:
    def __init__(self, tmp_path: Path, **settings: Any) -> None:
        self.clock = Clock()
        self.settings = Settings(data_dir=tmp_path, stop_grace_s=5, rule_finish_timeout_s=30, **settings)
        self.store = InMemoryJobStore()
        self.runtime = FakeRuntime()
        self.service = JobService(self.store, self.runtime, self.settings, clock=self.clock)
        self.supervisor = Supervisor(self.store, self.runtime, self.settings, clock=self.clock)

    def tick(self, seconds: float = 0.1) -> dict[str, Any]:
        self.clock.now += seconds
        self.supervisor.run_once()
        return self.service.describe_training_job("job-1")

    def training(self, **state: Any) -> None:
        self.runtime.set_state("job-1-training", ContainerState(**state))

    def rule(self, i: int, **state: Any) -> None:
        self.runtime.set_state(f"job-1-rule-{i}", ContainerState(**state))

    def result(self, rule: str, status: str, *, running: bool = False, **extra: Any) -> None:
        """The rule container writes its result.json and (like murphy's evaluator, unless
        ``running``) exits."""
        names = [r.name for r in self.store.get("job-1").rules]
        uri = self.store.get("job-1").rules[names.index(rule)].result_uri
        body = {"status": status, "rule_name": rule, **extra}
        open_uri(self.settings, uri).put("result.json", json.dumps(body).encode())
        if not running:
            self.rule(names.index(rule), phase="exited", exit_code=0)


def statuses(job: dict[str, Any]) -> list[str]:
    return [r["RuleEvaluationStatus"] for r in job.get("DebugRuleEvaluationStatuses", [])]


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def test_launches_training_and_one_evaluator_per_rule(h: Harness) -> None:
    h.service.create_training_job(request(rules=2), account="123456789012", region="us-west-2")
    job = h.tick()
    assert [p.container_name for p in h.runtime.launched] == ["job-1-training", "job-1-rule-0", "job-1-rule-1"]
    rule_plan = h.runtime.launched[1]
    assert rule_plan.base_trial_uri == "s3://b/debug/job-1/debug-output"
    assert rule_plan.rule_parameters == {"rule_to_invoke": "ExplodingTensor"}
    assert statuses(job) == ["InProgress", "InProgress"]
    h.tick()
    assert len(h.runtime.launched) == 3  # never launched twice


def test_follows_the_training_stages_and_completes_after_rules_finish(h: Harness) -> None:
    h.service.create_training_job(request(), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="running", stage="Training")
    assert h.tick()["SecondaryStatus"] == "Training"
    h.training(phase="exited", exit_code=0)
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("InProgress", "Uploading")  # held for the rule
    h.result("Rule0", "NoIssuesFound", reason="training has ended")
    h.rule(0, phase="exited", exit_code=0)
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Completed", "Completed")
    assert statuses(job) == ["NoIssuesFound"]
    assert [t["Status"] for t in job["SecondaryStatusTransitions"]] == ["Starting", "Downloading", "Training", "Uploading", "Completed"]
    assert all(t["StatusMessage"] for t in job["SecondaryStatusTransitions"])


def test_a_finding_stops_the_job_and_the_other_rules(h: Harness) -> None:
    h.service.create_training_job(request(rules=2), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="running", stage="Training")
    h.tick()
    h.result("Rule0", "IssuesFound", step=2, message="LinearRegression_weight first went non-finite at step 2")
    job = h.tick()
    assert job["SecondaryStatus"] == "Stopping" and statuses(job) == ["IssuesFound", "Stopping"]
    assert "step 2" in job["DebugRuleEvaluationStatuses"][0]["StatusDetails"]
    assert ("job-1-training", False) in h.runtime.stops
    h.tick()
    assert ("job-1-rule-1", False) in h.runtime.stops
    h.training(phase="exited", exit_code=143)
    h.rule(1, phase="exited", exit_code=143)
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert statuses(job) == ["IssuesFound", "Stopped"]
    assert "Rule0" in job["SecondaryStatusTransitions"][-1]["StatusMessage"]
    assert "FailureReason" not in job


def test_a_result_from_a_container_that_lingers_is_read_within_the_result_poll(h: Harness) -> None:
    h.service.create_training_job(request(), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="running", stage="Training")
    h.rule(0, phase="running")
    h.tick()  # reads (nothing yet): the next read is due a second later
    h.result("Rule0", "IssuesFound", running=True, step=2, message="nan")
    for _ in range(8):  # 0.8 s: the container still runs, result.json is not read yet
        assert statuses(h.tick()) == ["InProgress"]
    job = h.tick(0.2)
    assert statuses(job) == ["IssuesFound"] and job["SecondaryStatus"] == "Stopping"


def test_no_result_reads_while_a_rule_runs_between_polls(h: Harness) -> None:
    h.service.create_training_job(request(), account="123456789012", region="us-west-2")
    h.tick()
    h.rule(0, phase="running")
    reads: list[str] = []
    orig = h.supervisor._read_result
    h.supervisor._read_result = lambda rule: reads.append(rule.name) or orig(rule)  # type: ignore[method-assign]
    for _ in range(30):  # 3 s of 0.1 s passes
        h.tick()
    assert 2 <= len(reads) <= 3  # about once a second (0.1 s steps add up unevenly), not 30 times
    h.result("Rule0", "NoIssuesFound")  # written, then the exit: read on the very next pass
    assert statuses(h.tick()) == ["NoIssuesFound"]


def test_a_finding_after_training_exited_still_stops(h: Harness) -> None:
    h.service.create_training_job(request(), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="exited", exit_code=0)
    h.tick()
    h.result("Rule0", "IssuesFound", step=2, message="nan")
    h.rule(0, phase="exited", exit_code=0)
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")


def test_action_json_decides_instead_of_the_default(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    req = request()
    req["DebugRuleConfigurations"][0]["RuleParameters"]["action_json"] = '{"name": "email", "endpoint": "a@b.c"}'
    h.service.create_training_job(req, account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="running", stage="Training")
    h.result("Rule0", "IssuesFound", step=3, actions=[{"name": "email", "endpoint": "a@b.c"}])
    job = h.tick()
    assert job["TrainingJobStatus"] == "InProgress"  # an email action does not stop
    assert h.store.get("job-1").notes["notifications"][0]["endpoint"] == "a@b.c"


def test_stop_training_action_stops_only_the_named_job(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.service.create_training_job(request(), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="running", stage="Training")
    h.result("Rule0", "IssuesFound", step=3, actions=[{"name": "stoptraining", "training_job_name": "job-1"}])
    assert h.tick()["SecondaryStatus"] == "Stopping"


def test_no_stop_on_finding_setting_gives_aws_semantics(tmp_path: Path) -> None:
    h = Harness(tmp_path, stop_on_finding=False)
    h.service.create_training_job(request(), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="running", stage="Training")
    h.result("Rule0", "IssuesFound", step=3)
    job = h.tick()
    assert job["TrainingJobStatus"] == "InProgress" and statuses(job) == ["IssuesFound"]


def test_user_stop_escalates_to_sigkill_after_the_grace_period(h: Harness) -> None:
    h.service.create_training_job(request(rules=0), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="running", stage="Training")
    h.tick()
    h.service.stop_training_job("job-1")
    assert h.service.describe_training_job("job-1")["TrainingJobStatus"] == "Stopping"
    h.tick()
    assert h.runtime.stops == [("job-1-training", False)]
    h.tick(4.0)
    assert h.runtime.stops == [("job-1-training", False)]
    h.tick(2.0)
    assert h.runtime.stops == [("job-1-training", False), ("job-1-training", True)]
    h.training(phase="exited", exit_code=None)
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")
    with pytest.raises(ValidationException, match="is in status Stopped"):
        h.service.stop_training_job("job-1")


def test_training_failure_uses_the_failure_file_then_the_log(h: Harness) -> None:
    h.service.create_training_job(request(rules=0), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="exited", exit_code=1, failure="ValueError: bad data in channel train", log_tail="x\ny")
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Failed", "Failed")
    assert job["FailureReason"] == "ValueError: bad data in channel train"


def test_training_failure_without_failure_file_names_exit_code_and_log(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.service.create_training_job(request(rules=0), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="exited", exit_code=3, log_tail="Traceback...\nKeyError: 'lr'")
    job = h.tick()
    assert "exited with code 3" in job["FailureReason"] and "KeyError: 'lr'" in job["FailureReason"]


def test_a_crashing_rule_is_error_and_training_continues(h: Harness) -> None:
    h.service.create_training_job(request(), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="running", stage="Training")
    h.rule(0, phase="exited", exit_code=1, log_tail="Segmentation fault")
    job = h.tick()
    assert statuses(job) == ["Error"] and "Segmentation fault" in job["DebugRuleEvaluationStatuses"][0]["StatusDetails"]
    assert job["TrainingJobStatus"] == "InProgress"
    h.training(phase="exited", exit_code=0)
    assert h.tick()["TrainingJobStatus"] == "Completed"


def test_vanished_training_container_fails_the_job_and_closes_the_trial(h: Harness) -> None:
    h.service.create_training_job(request(), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="missing", log_tail="")
    job = h.tick()
    assert job["TrainingJobStatus"] == "InProgress"  # the rule still judges what was saved
    assert open_uri(h.settings, "s3://b/debug/job-1/debug-output").exists("training_job_end.ts")
    h.result("Rule0", "NoIssuesFound")
    job = h.tick()
    assert job["TrainingJobStatus"] == "Failed" and "vanished" in job["FailureReason"]


def test_max_runtime_exceeded(h: Harness) -> None:
    h.service.create_training_job(request(rules=0, StoppingCondition={"MaxRuntimeInSeconds": 10}), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="running", stage="Training")
    h.tick()
    assert h.tick(11)["TrainingJobStatus"] == "Stopping"
    h.training(phase="exited", exit_code=143)
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "MaxRuntimeExceeded")


def test_unknown_image_fails_the_job_with_the_reason(h: Harness) -> None:
    h.runtime.fail_launch("nope:latest", "image 'nope:latest' is not in the image catalog")
    req = request()
    req["AlgorithmSpecification"]["TrainingImage"] = "nope:latest"
    h.service.create_training_job(req, account="123456789012", region="us-west-2")
    job = h.tick()
    assert job["TrainingJobStatus"] == "Failed" and "nope:latest" in job["FailureReason"]
    assert statuses(job) == ["Stopped"]


def test_rules_that_never_finish_are_stopped_after_the_timeout(h: Harness) -> None:
    h.service.create_training_job(request(), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="exited", exit_code=0)
    h.tick()
    assert statuses(h.tick(31)) == ["Stopping"]  # ran out of time: asked to stop
    assert h.runtime.stops == []
    h.tick()
    assert h.runtime.stops == [("job-1-rule-0", False)]  # SIGTERM on the next pass
    h.rule(0, phase="exited", exit_code=143)
    job = h.tick()
    assert job["TrainingJobStatus"] == "Completed" and statuses(job) == ["Stopped"]


def test_a_new_supervisor_carries_on_from_the_store(h: Harness) -> None:
    h.service.create_training_job(request(), account="123456789012", region="us-west-2")
    h.tick()
    h.training(phase="running", stage="Training")
    h.tick()
    h.supervisor = Supervisor(h.store, h.runtime, h.settings, clock=h.clock)  # "restarted"
    h.training(phase="exited", exit_code=0)
    h.result("Rule0", "NoIssuesFound")
    assert h.tick()["TrainingJobStatus"] == "Completed"
    assert len(h.runtime.launched) == 2
