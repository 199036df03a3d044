"""Server-side validation with SageMaker's wording (through the wire, as a client sees it)."""

from __future__ import annotations

from typing import Any

import pytest
from apihelp import RULE_IMAGE, TestClient, aws, error_of, training_request

NAME_RULE = "Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"


def invalid(client: TestClient, body: dict[str, Any], target: str = "SageMaker.CreateTrainingJob") -> str:
    status, code, text = error_of(aws(client, target, body))
    assert (status, code) == (400, "ValidationException"), text
    return text


def rule(name: str, **params: str) -> dict[str, Any]:
    return {"RuleConfigurationName": name, "RuleEvaluatorImage": RULE_IMAGE, "RuleParameters": params}


@pytest.mark.parametrize("target", ["SageMaker.CreateTrainingJob", "SageMaker.DescribeTrainingJob", "SageMaker.StopTrainingJob"])
def test_bad_name_has_the_issue_message(client: TestClient, target: str) -> None:
    body = training_request("bad_name") if "Create" in target else {"TrainingJobName": "bad_name"}
    assert invalid(client, body, target) == (
        f"1 validation error detected: Value 'bad_name' at 'trainingJobName' failed to satisfy constraint: {NAME_RULE}"
    )


def test_a_64_character_name_breaks_the_length_and_the_pattern(client: TestClient) -> None:
    name = "a" * 64  # the pattern's {0,62} caps the length too: one value, two errors
    assert invalid(client, training_request(name)) == (
        f"2 validation errors detected: Value '{name}' at 'trainingJobName' failed to satisfy constraint: {NAME_RULE}; "
        f"Value '{name}' at 'trainingJobName' failed to satisfy constraint: Member must have length less than or equal to 63"
    )


def test_members_murphy_requires(client: TestClient) -> None:
    body = training_request()
    for member in ("AlgorithmSpecification", "ResourceConfig", "StoppingCondition", "RoleArn"):
        del body[member]
    text = invalid(client, body)
    assert text.startswith("4 validation errors detected: ")
    for path in ("algorithmSpecification", "roleArn", "resourceConfig", "stoppingCondition"):
        assert f"Value null at '{path}' failed to satisfy constraint: Member must not be null" in text


def test_training_image_is_required_and_algorithms_are_refused(client: TestClient) -> None:
    assert invalid(client, training_request(AlgorithmSpecification={"TrainingInputMode": "File"})) == (
        "1 validation error detected: Value null at 'algorithmSpecification.trainingImage' failed to satisfy "
        "constraint: Member must not be null"
    )
    text = invalid(client, training_request(AlgorithmSpecification={"TrainingInputMode": "File", "AlgorithmName": "xgboost"}))
    assert "at 'algorithmSpecification.algorithmName'" in text and "murphy has no built-in algorithms" in text


def test_resource_config_needs_instances(client: TestClient) -> None:
    text = invalid(client, training_request(ResourceConfig={"VolumeSizeInGB": 30, "InstanceCount": 0}))
    assert text == ("2 validation errors detected: Value null at 'resourceConfig.instanceType' failed to satisfy "
                    "constraint: Member must not be null; Value '0' at 'resourceConfig.instanceCount' failed to "
                    "satisfy constraint: Member must have value greater than or equal to 1")


def test_enums_small_and_from_botocore(client: TestClient) -> None:
    body = training_request(AlgorithmSpecification={"TrainingInputMode": "Stream", "TrainingImage": "i"},
                            ResourceConfig={"InstanceType": "ml.banana.huge", "InstanceCount": 1})
    text = invalid(client, body)
    assert ("Value 'Stream' at 'algorithmSpecification.trainingInputMode' failed to satisfy constraint: "
            "Member must satisfy enum value set: [Pipe, File, FastFile]") in text
    assert "Value 'ml.banana.huge' at 'resourceConfig.instanceType' failed to satisfy constraint: Member must satisfy enum value set: [" in text
    assert "ml.m5.xlarge" in text
    ok = training_request(DebugRuleConfigurations=[{**rule("R"), "InstanceType": "ml.t3.medium"}])
    assert aws(client, "SageMaker.CreateTrainingJob", ok).status_code == 200
    bad = training_request("job-2", DebugRuleConfigurations=[{**rule("R"), "InstanceType": "ml.p4d.24xlarge.x"}])
    assert "at 'debugRuleConfigurations.1.member.instanceType'" in invalid(client, bad)


def test_rule_limits(client: TestClient) -> None:
    text = invalid(client, training_request(DebugRuleConfigurations=[rule(f"R{i}") for i in range(21)]))
    assert text.startswith("1 validation error detected: Value '[")
    assert text.endswith("at 'debugRuleConfigurations' failed to satisfy constraint: Member must have length less than or equal to 20")
    params = {f"k{i}": "v" for i in range(101)}
    text = invalid(client, training_request(DebugRuleConfigurations=[rule("R", **params)]))
    assert text.endswith("at 'debugRuleConfigurations.1.member.ruleParameters' failed to satisfy constraint: "
                         "Member must have length less than or equal to 100")
    text = invalid(client, training_request(DebugRuleConfigurations=[rule("A"), rule("B", rule_to_invoke="x" * 257)]))
    assert text == ("1 validation error detected: Value '{rule_to_invoke=" + "x" * 257 + "}' at "
                    "'debugRuleConfigurations.2.member.ruleParameters' failed to satisfy constraint: "
                    "Map value must satisfy constraint: [Member must have length less than or equal to 256]")
    text = invalid(client, training_request(DebugRuleConfigurations=[rule("A", **{"": "v"})]))
    assert "Map keys must satisfy constraint: [Member must have length greater than or equal to 1]" in text
    assert invalid(client, training_request(DebugRuleConfigurations=[{"RuleConfigurationName": "A"}])) == (
        "1 validation error detected: Value null at 'debugRuleConfigurations.1.member.ruleEvaluatorImage' "
        "failed to satisfy constraint: Member must not be null"
    )


def test_rule_names_are_unique_across_debug_and_profiler_rules(client: TestClient) -> None:
    body = training_request(ProfilerRuleConfigurations=[rule("ProfilerReport"), rule("ExplodingTensor")])
    assert invalid(client, body) == (
        "1 validation error detected: Value 'ExplodingTensor' at 'profilerRuleConfigurations.2.member."
        "ruleConfigurationName' failed to satisfy constraint: RuleConfigurationName must be unique across "
        "DebugRuleConfigurations and ProfilerRuleConfigurations"
    )


def test_map_and_list_limits(client: TestClient) -> None:
    text = invalid(client, training_request(HyperParameters={"lr": "1" * 2501}))
    assert text.endswith("at 'hyperParameters' failed to satisfy constraint: Map value must satisfy constraint: "
                         "[Member must have length less than or equal to 2500]")
    text = invalid(client, training_request(HyperParameters={f"h{i}": "1" for i in range(101)}))
    assert text.endswith("at 'hyperParameters' failed to satisfy constraint: Member must have length less than or equal to 100")
    text = invalid(client, training_request(HyperParameters={"k" * 257: "1"}))
    assert "Map keys must satisfy constraint: [Member must have length less than or equal to 256]" in text
    text = invalid(client, training_request(Environment={f"E{i}": "1" for i in range(101)}))
    assert text.endswith("at 'environment' failed to satisfy constraint: Member must have length less than or equal to 100")
    text = invalid(client, training_request(Environment={"1BAD": "x"}))
    assert "Map keys must satisfy constraint: [Member must satisfy regular expression pattern: ^[a-zA-Z_][a-zA-Z0-9_]*]" in text
    text = invalid(client, training_request(Tags=[{"Key": f"k{i}", "Value": "v"} for i in range(51)]))
    assert text.endswith("at 'tags' failed to satisfy constraint: Member must have length less than or equal to 50")
    text = invalid(client, training_request(Tags=[{"Key": "ok", "Value": "v"}, {"Key": "bad*", "Value": "v"}]))
    assert "Value 'bad*' at 'tags.2.member.key' failed to satisfy constraint: Member must satisfy regular expression pattern" in text


def test_role_arn_and_s3_uri_patterns(client: TestClient) -> None:
    text = invalid(client, training_request(RoleArn="arn:aws:iam::12345:role/SageMakerRole"))
    assert text == ("1 validation error detected: Value 'arn:aws:iam::12345:role/SageMakerRole' at 'roleArn' failed to "
                    "satisfy constraint: Member must satisfy regular expression pattern: "
                    r"^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+")
    text = invalid(client, training_request(OutputDataConfig={"S3OutputPath": "bucket/out"}))
    assert text == ("1 validation error detected: Value 'bucket/out' at 'outputDataConfig.s3OutputPath' failed to "
                    "satisfy constraint: Member must satisfy regular expression pattern: ^(https|s3)://([^/]+)/?(.*)")
    text = invalid(client, training_request(DebugHookConfig={"S3OutputPath": "file:///tmp"}))
    assert "at 'debugHookConfig.s3OutputPath'" in text


def test_wrong_types_and_nulls(client: TestClient) -> None:
    body = training_request(StoppingCondition={"MaxRuntimeInSeconds": "3600"}, EnableNetworkIsolation="yes",
                            VpcConfig=None)
    body["ResourceConfig"]["InstanceCount"] = 1.5
    text = invalid(client, body)
    assert "Value '3600' at 'stoppingCondition.maxRuntimeInSeconds' failed to satisfy constraint: Member must be an integer" in text
    assert "Value 'yes' at 'enableNetworkIsolation' failed to satisfy constraint: Member must be a boolean" in text
    assert "Value '1.5' at 'resourceConfig.instanceCount' failed to satisfy constraint: Member must be an integer" in text
    assert text.startswith("3 validation errors detected")  # an explicit null for an optional member is absence


def test_unknown_members_are_rejected_not_dropped(client: TestClient) -> None:
    body = training_request()
    body["AlgorithmSpecification"]["TrainingImageUri"] = "x"
    body["ServerlessJobConfig"] = {"BaseModelArn": "arn", "JobType": "FineTuning"}
    text = invalid(client, body)
    assert text.startswith("2 validation errors detected: ")
    assert ("Value 'x' at 'algorithmSpecification.trainingImageUri' failed to satisfy constraint: "
            "AlgorithmSpecification has no member named TrainingImageUri") in text
    assert "at 'serverlessJobConfig' failed to satisfy constraint: Member ServerlessJobConfig of CreateTrainingJobRequest is not supported by murphy" in text


def test_list_training_jobs_limits(client: TestClient) -> None:
    for bad, constraint in ((0, "greater than or equal to 1"), (101, "less than or equal to 100")):
        assert invalid(client, {"MaxResults": bad}, "SageMaker.ListTrainingJobs") == (
            f"1 validation error detected: Value '{bad}' at 'maxResults' failed to satisfy constraint: "
            f"Member must have value {constraint}"
        )
    text = invalid(client, {"NameContains": "a_b", "SortBy": "Size", "CreationTimeAfter": "last tuesday"},
                   "SageMaker.ListTrainingJobs")
    assert text.startswith("3 validation errors detected")
    assert "Value 'last tuesday' at 'creationTimeAfter' failed to satisfy constraint: Member must be a timestamp" in text


def test_the_sdk_request_is_accepted_verbatim(client: TestClient) -> None:
    body = training_request()
    assert aws(client, "SageMaker.CreateTrainingJob", body).status_code == 200
    job = aws(client, "SageMaker.DescribeTrainingJob", {"TrainingJobName": "job-1"}).json()
    for member in ("AlgorithmSpecification", "HyperParameters", "DebugHookConfig", "DebugRuleConfigurations",
                   "ProfilerConfig", "ResourceConfig", "StoppingCondition", "RoleArn"):
        assert job[member] == body[member], member
    # As AWS does, an absent KmsKeyId is echoed empty (the SDK's Estimator.attach indexes it).
    assert job["OutputDataConfig"] == {"KmsKeyId": "", **body["OutputDataConfig"]}
