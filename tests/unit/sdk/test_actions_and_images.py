"""Rule actions serialise like smdebug-rulesconfig 1.0.1; image URIs like the SDK's tables."""

from __future__ import annotations

import json

import pytest

from murphy.sdk import rule_configs
from murphy.sdk.images import (
    custom_rule_image_uri,
    processor_for,
    pytorch_image_uri,
    rule_image_uri,
)
from murphy.sdk.rule_configs import SMS, ActionList, Email, StopTraining, is_valid_action_object


def unescape(action_json: str) -> object:
    """What smdebug's own check does (``json.loads("<string>")`` inside exec): drop the backslashes."""
    return json.loads(action_json.replace('\\"', '"'))


def test_each_action_serialises_with_escaped_quotes_in_smdebug_key_order() -> None:
    stop = StopTraining()
    assert stop.serialize() == '{\\"name\\": \\"stoptraining\\"}'
    stop.update_training_job_prefix_if_not_specified("job-1")
    assert stop.serialize() == '{\\"name\\": \\"stoptraining\\", \\"training_job_prefix\\": \\"job-1\\"}'
    custom = StopTraining("my-prefix")
    custom.update_training_job_prefix_if_not_specified("job-1")
    assert custom.serialize() == '{\\"training_job_prefix\\": \\"my-prefix\\", \\"name\\": \\"stoptraining\\"}'
    assert Email("first.last@example.com").serialize() == '{\\"endpoint\\": \\"first.last@example.com\\", \\"name\\": \\"email\\"}'
    assert unescape(SMS("+15555550100").serialize()) == {"endpoint": "+15555550100", "name": "sms"}


def test_action_list_is_a_json_list_string() -> None:
    actions = ActionList(StopTraining(), Email("a@b.co"), SMS("+1234567890"))
    actions.update_training_job_prefix_if_not_specified("job-2")
    assert unescape(actions.serialize()) == [
        {"name": "stoptraining", "training_job_prefix": "job-2"},
        {"endpoint": "a@b.co", "name": "email"},
        {"endpoint": "+1234567890", "name": "sms"},
    ]
    assert actions.serialize().startswith('[{\\"name\\"')
    assert is_valid_action_object(actions) and is_valid_action_object(Email("a@b.co"))
    assert not is_valid_action_object("stoptraining")


@pytest.mark.parametrize("bad", [
    lambda: StopTraining("no spaces"), lambda: Email("not-an-address"), lambda: Email('a"b@c.de'),
    lambda: SMS("5555550100"), lambda: ActionList(StopTraining(), "x"),  # type: ignore[arg-type]
])
def test_invalid_actions_are_refused(bad: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        bad()  # type: ignore[operator]


def test_rule_configs_exposes_the_catalog() -> None:
    assert rule_configs.exploding_tensor() == {
        "DebugRuleConfiguration": {"RuleConfigurationName": "ExplodingTensor",
                                   "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}}
    assert "vanishing_gradient" in rule_configs.__all__


def test_image_uris() -> None:
    assert rule_image_uri("us-west-2") == "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"
    assert rule_image_uri("cn-north-1") == "618459771430.dkr.ecr.cn-north-1.amazonaws.com.cn/sagemaker-debugger-rules:latest"
    assert custom_rule_image_uri("us-west-2") == (
        "759209512951.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rule-evaluator:latest")
    assert custom_rule_image_uri("xx-nowhere-1") == "murphy/rule-evaluator:latest"
    assert [processor_for(t) for t in ("ml.m5.xlarge", "ml.c5.2xlarge", "ml.g5.xlarge", "ml.p4d.24xlarge", "local")] == [
        "cpu", "cpu", "gpu", "gpu", "cpu"]
    assert pytorch_image_uri("eu-west-1", "2.1.0", None, "ml.m5.large").endswith("/pytorch-training:2.1.0-cpu-py310")
    assert pytorch_image_uri("af-south-1", "2.8", None, "ml.m5.large").startswith("626614931356.dkr.ecr.af-south-1.")
    with pytest.raises(ValueError, match="py_version"):
        pytorch_image_uri("us-west-2", "9.9", None, "ml.m5.large")
    with pytest.raises(ValueError, match="instance type"):
        processor_for("m5.large")
