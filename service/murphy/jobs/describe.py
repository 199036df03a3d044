"""A job record as SageMaker's DescribeTrainingJob and ListTrainingJobs bodies.

Times are epoch seconds (numbers), as AWS JSON-protocol services return them. The request is
echoed member by member (only members DescribeTrainingJob's output shape has).
"""

from __future__ import annotations

from typing import Any

from murphy.jobs.model import JobRecord, RuleState
from murphy.jobs.naming import model_artifacts_uri

#: Members of CreateTrainingJob's request that DescribeTrainingJob echoes.
ECHOED = (
    "HyperParameters", "AlgorithmSpecification", "RoleArn", "InputDataConfig", "OutputDataConfig",
    "ResourceConfig", "VpcConfig", "StoppingCondition", "EnableNetworkIsolation",
    "EnableInterContainerTrafficEncryption", "EnableManagedSpotTraining", "CheckpointConfig",
    "DebugHookConfig", "ExperimentConfig", "DebugRuleConfigurations", "TensorBoardOutputConfig",
    "ProfilerConfig", "ProfilerRuleConfigurations", "Environment", "RetryStrategy", "RemoteDebugConfig",
    "InfraCheckConfig",
)
MAX_FAILURE_REASON = 1024


def _rule_status(rule: RuleState) -> dict[str, Any]:
    out: dict[str, Any] = {
        "RuleConfigurationName": rule.name,
        "RuleEvaluationJobArn": rule.job_arn,
        "RuleEvaluationStatus": rule.status.value,
        "LastModifiedTime": rule.last_modified,
    }
    if rule.details:
        out["StatusDetails"] = rule.details[:1024]
    return out


def describe(record: JobRecord) -> dict[str, Any]:
    spec = record.spec
    body: dict[str, Any] = {"TrainingJobName": record.name, "TrainingJobArn": record.arn}
    output_path = spec.get("OutputDataConfig", {}).get("S3OutputPath", "")
    body["ModelArtifacts"] = {"S3ModelArtifacts": model_artifacts_uri(output_path, record.name)}
    body["TrainingJobStatus"] = record.status.value
    body["SecondaryStatus"] = record.secondary.value
    if record.failure_reason:
        body["FailureReason"] = record.failure_reason[-MAX_FAILURE_REASON:]
    for key in ECHOED:
        if key in spec:
            body[key] = spec[key]
    body.setdefault("StoppingCondition", {})
    if "OutputDataConfig" in body and "KmsKeyId" not in body["OutputDataConfig"]:
        # AWS answers with an empty KmsKeyId when the request had none; the SageMaker SDK's
        # Estimator.attach() indexes it (KeyError without it).
        body["OutputDataConfig"] = {"KmsKeyId": "", **body["OutputDataConfig"]}
    body["CreationTime"] = record.creation_time
    body["LastModifiedTime"] = record.last_modified_time
    if record.training_start_time is not None:
        body["TrainingStartTime"] = record.training_start_time
    if record.training_end_time is not None:
        body["TrainingEndTime"] = record.training_end_time
        if record.training_start_time is not None:
            seconds = max(1, round(record.training_end_time - record.training_start_time))
            body["TrainingTimeInSeconds"] = seconds
            body["BillableTimeInSeconds"] = seconds
    body["SecondaryStatusTransitions"] = [
        {"Status": t.status.value, "StartTime": t.start_time, "StatusMessage": t.message}
        | ({"EndTime": t.end_time} if t.end_time is not None else {})
        for t in record.transitions
    ]
    debug = [_rule_status(r) for r in record.rules if r.kind == "debug"]
    profiler = [_rule_status(r) for r in record.rules if r.kind == "profiler"]
    if debug:
        body["DebugRuleEvaluationStatuses"] = debug
    if profiler:
        body["ProfilerRuleEvaluationStatuses"] = profiler
    if "ProfilerConfig" in spec:
        # murphy saves no system/framework profiles, so it never reports profiling as enabled.
        body["ProfilingStatus"] = "Disabled"
    return body


def summary(record: JobRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "TrainingJobName": record.name,
        "TrainingJobArn": record.arn,
        "CreationTime": record.creation_time,
        "LastModifiedTime": record.last_modified_time,
        "TrainingJobStatus": record.status.value,
        "SecondaryStatus": record.secondary.value,
    }
    if record.training_end_time is not None:
        out["TrainingEndTime"] = record.training_end_time
    return out
