"""Envelopes and ``events_for``: which record changes produce an event, and what it says."""

from __future__ import annotations

import copy
import re
import uuid

from murphy.events.envelope import envelope, iso_time, job_name, parse_time
from murphy.jobs.describe import describe
from murphy.jobs.events import changes, events_for
from murphy.jobs.model import JobRecord, RuleEvaluationStatus, RuleState, SecondaryStatus

ARN = "arn:aws:sagemaker:us-west-2:111122223333:training-job/job-a"
R = RuleEvaluationStatus
S = SecondaryStatus


def record() -> JobRecord:
    rec = JobRecord.new("job-a", ARN, "111122223333", "us-west-2",
                        {"RoleArn": "arn:aws:iam::111122223333:role/r"}, now=1000.0)
    rec.rules = [
        RuleState("ExplodingTensor", "arn:aws:sagemaker:us-west-2:111122223333:processing-job/et", "debug"),
        RuleState("LossNotDecreasing", "arn:aws:sagemaker:us-west-2:111122223333:processing-job/ln", "debug"),
    ]
    rec.tags = [{"Key": "team", "Value": "vision"}]
    return rec


def test_envelope_has_eventbridges_fields() -> None:
    ev = envelope({"a": 1}, account="111122223333", region="us-west-2", resources=[ARN],
                  time=1538850373.9)
    assert list(ev) == ["version", "id", "detail-type", "source", "account", "time", "region",
                        "resources", "detail"]
    assert ev["version"] == "0"
    assert uuid.UUID(ev["id"]).version == 4
    assert ev["detail-type"] == "SageMaker Training Job State Change"
    assert ev["source"] == "aws.sagemaker"
    assert ev["time"] == "2018-10-06T18:26:13Z" == iso_time(1538850373.9)
    assert parse_time(ev["time"]).timestamp() == 1538850373
    assert ev["resources"] == [ARN] and ev["detail"] == {"a": 1}
    assert envelope({}, account="1", region="r", resources=[], time=0).get("id") != ev["id"]
    assert job_name({"detail": {"TrainingJobName": "job-a"}}) == "job-a"
    assert job_name({"detail": "x"}) is None


def test_creation_is_one_event_with_the_describe_body() -> None:
    new = record()
    [ev] = events_for(None, new)
    assert ev["account"] == "111122223333" and ev["region"] == "us-west-2"
    assert ev["resources"] == [ARN]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", ev["time"])
    detail = ev["detail"]
    assert {k: v for k, v in detail.items() if k not in ("Tags", "MurphyChanges")} == describe(new)
    assert detail["Tags"] == {"team": "vision"}
    assert [s["RuleEvaluationStatus"] for s in detail["DebugRuleEvaluationStatuses"]] == ["InProgress"] * 2
    assert detail["MurphyChanges"] == [
        {"Kind": "TrainingJobStatus", "From": None, "To": "InProgress"},
        {"Kind": "SecondaryStatus", "From": None, "To": "Starting"},
        {"Kind": "RuleEvaluationStatus", "From": None, "To": "InProgress", "RuleConfigurationName": "ExplodingTensor"},
        {"Kind": "RuleEvaluationStatus", "From": None, "To": "InProgress", "RuleConfigurationName": "LossNotDecreasing"},
    ]


def test_bookkeeping_and_tags_make_no_event() -> None:
    old = record()
    new = copy.deepcopy(old)
    new.tags.append({"Key": "k", "Value": "v"})
    new.notes["signals"] = {"training": {"term": 1.0}}
    new.rules[0].details = "still looking"  # details alone: not a status change
    new.version = 7
    assert events_for(old, new) == []


def test_stages_passed_in_one_write_are_each_reported() -> None:
    old = record()
    new = copy.deepcopy(old)
    new.transition(S.Training, "t", now=1001.0)
    new.transition(S.Uploading, "u", now=1002.0)
    [ev] = events_for(old, new)
    assert ev["detail"]["SecondaryStatus"] == "Uploading"
    assert ev["detail"]["MurphyChanges"] == [
        {"Kind": "SecondaryStatus", "From": "Starting", "To": "Training"},
        {"Kind": "SecondaryStatus", "From": "Training", "To": "Uploading"},
    ]


def test_a_finding_names_rule_step_and_tensor() -> None:
    old = record()
    old.transition(S.Training, "t", now=1001.0)
    new = copy.deepcopy(old)
    rule = new.rules[0]
    rule.result = {"status": "IssuesFound", "step": 4, "tensor": "loss", "message": "nan"}
    rule.set_status(R.IssuesFound, "RuleEvaluationConditionMet: ... at step 4", now=1002.0)
    new.transition(S.Stopping, "Training job stopped by rule ExplodingTensor", now=1002.0)
    new.rules[1].set_status(R.Stopping, None, now=1002.0)
    [ev] = events_for(old, new)
    assert ev["detail"]["TrainingJobStatus"] == "Stopping"
    assert ev["detail"]["MurphyChanges"] == [
        {"Kind": "TrainingJobStatus", "From": "InProgress", "To": "Stopping"},
        {"Kind": "SecondaryStatus", "From": "Training", "To": "Stopping"},
        {"Kind": "RuleEvaluationStatus", "From": "InProgress", "To": "IssuesFound",
         "RuleConfigurationName": "ExplodingTensor", "Step": 4, "Tensor": "loss"},
        {"Kind": "RuleEvaluationStatus", "From": "InProgress", "To": "Stopping",
         "RuleConfigurationName": "LossNotDecreasing"},
    ]
    statuses = {s["RuleConfigurationName"]: s for s in ev["detail"]["DebugRuleEvaluationStatuses"]}
    assert statuses["ExplodingTensor"]["RuleEvaluationStatus"] == "IssuesFound"
    assert "step 4" in statuses["ExplodingTensor"]["StatusDetails"]


def test_a_rule_change_alone_is_an_event() -> None:
    old = record()
    new = copy.deepcopy(old)
    new.rules[1].result = {"status": "NoIssuesFound", "step": None}
    new.rules[1].set_status(R.NoIssuesFound, "No issues found.", now=1003.0)
    assert changes(old, new) == [{"Kind": "RuleEvaluationStatus", "From": "InProgress",
                                  "To": "NoIssuesFound", "RuleConfigurationName": "LossNotDecreasing"}]
    [ev] = events_for(old, new)
    assert ev["detail"]["TrainingJobStatus"] == "InProgress"


def test_every_event_has_its_own_id() -> None:
    new = record()
    ids = {events_for(None, new)[0]["id"] for _ in range(20)}
    assert len(ids) == 20
