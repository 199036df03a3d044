"""SageMaker response shapes murphy emits.

The app serialises JobService's dicts directly (re-validating every response would cost more
than the whole describe path); these models document the bodies, are checked against botocore's
model, and validate JobService's output in the tests (``extra="forbid"``: an unexpected member
fails there).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from murphy.api.shapes import common as c
from murphy.api.shapes import training as t
from murphy.api.shapes.common import AwsModel, enum, s
from murphy.api.shapes.requests import TagList


class CreateTrainingJobResponse(AwsModel):
    aws_shape = "CreateTrainingJobResponse"
    TrainingJobArn: c.TrainingJobArn


class ModelArtifacts(AwsModel):
    aws_shape = "ModelArtifacts"
    S3ModelArtifacts: c.S3Uri


class SecondaryStatusTransition(AwsModel):
    """``StatusMessage`` is optional in the model but the SDK indexes it: always present here."""

    aws_shape = "SecondaryStatusTransition"
    Status: c.SecondaryStatus
    StartTime: c.Timestamp
    EndTime: c.Timestamp | None = None
    StatusMessage: str


class DebugRuleEvaluationStatus(AwsModel):
    """Name and status are optional in the model but the SDK indexes both: required here."""

    aws_shape = "DebugRuleEvaluationStatus"
    RuleConfigurationName: Annotated[str, s(1, 256)]
    RuleEvaluationJobArn: c.ProcessingJobArn | None = None
    RuleEvaluationStatus: c.RuleEvaluationStatus
    StatusDetails: Annotated[str, s(0, 1024)] | None = None
    LastModifiedTime: c.Timestamp | None = None


class ProfilerRuleEvaluationStatus(DebugRuleEvaluationStatus):
    aws_shape = "ProfilerRuleEvaluationStatus"


class MetricData(AwsModel):
    aws_shape = "MetricData"
    MetricName: Annotated[str, s(1, 255, r".+")] | None = None
    Value: float | None = None
    Timestamp: c.Timestamp | None = None


class WarmPoolStatus(AwsModel):
    aws_shape = "WarmPoolStatus"
    Status: c.WarmPoolResourceStatus
    ResourceRetainedBillableTimeInSeconds: c.NonNegativeInt | None = None
    ReusedByJob: c.TrainingJobName | None = None


_WarmPoolStatus = WarmPoolStatus  # a field of the same name would shadow it


class DescribeTrainingJobResponse(AwsModel):
    aws_shape = "DescribeTrainingJobResponse"
    TrainingJobName: c.TrainingJobName
    TrainingJobArn: c.TrainingJobArn
    ModelArtifacts: ModelArtifacts
    TrainingJobStatus: c.TrainingJobStatus
    SecondaryStatus: c.SecondaryStatus
    FailureReason: Annotated[str, s(0, 1024)] | None = None
    HyperParameters: t.HyperParameters | None = None
    AlgorithmSpecification: t.AlgorithmSpecification | None = None
    RoleArn: c.RoleArn | None = None
    InputDataConfig: Annotated[list[t.Channel], Field(min_length=1, max_length=20)] | None = None
    OutputDataConfig: t.OutputDataConfig | None = None
    ResourceConfig: t.ResourceConfig | None = None
    WarmPoolStatus: _WarmPoolStatus | None = None
    VpcConfig: t.VpcConfig | None = None
    StoppingCondition: t.StoppingCondition
    CreationTime: c.Timestamp
    TrainingStartTime: c.Timestamp | None = None
    TrainingEndTime: c.Timestamp | None = None
    # Optional in the model; the SDK timestamps printed transitions with it.
    LastModifiedTime: c.Timestamp
    SecondaryStatusTransitions: list[SecondaryStatusTransition] | None = None
    FinalMetricDataList: Annotated[list[MetricData], Field(max_length=40)] | None = None
    EnableNetworkIsolation: bool | None = None
    EnableInterContainerTrafficEncryption: bool | None = None
    EnableManagedSpotTraining: bool | None = None
    CheckpointConfig: t.CheckpointConfig | None = None
    TrainingTimeInSeconds: c.PositiveInt | None = None
    BillableTimeInSeconds: c.PositiveInt | None = None
    DebugHookConfig: t.DebugHookConfig | None = None
    ExperimentConfig: t.ExperimentConfig | None = None
    DebugRuleConfigurations: Annotated[list[t.DebugRuleConfiguration], Field(max_length=20)] | None = None
    TensorBoardOutputConfig: t.TensorBoardOutputConfig | None = None
    DebugRuleEvaluationStatuses: Annotated[list[DebugRuleEvaluationStatus], Field(max_length=20)] | None = None
    ProfilerConfig: t.ProfilerConfig | None = None
    ProfilerRuleConfigurations: Annotated[list[t.ProfilerRuleConfiguration], Field(max_length=20)] | None = None
    ProfilerRuleEvaluationStatuses: Annotated[list[ProfilerRuleEvaluationStatus], Field(max_length=20)] | None = None
    ProfilingStatus: Annotated[str, enum("Enabled", "Disabled")] | None = None
    Environment: t.Environment | None = None
    RetryStrategy: t.RetryStrategy | None = None
    RemoteDebugConfig: t.RemoteDebugConfig | None = None
    InfraCheckConfig: t.InfraCheckConfig | None = None


class TrainingJobSummary(AwsModel):
    aws_shape = "TrainingJobSummary"
    TrainingJobName: c.TrainingJobName
    TrainingJobArn: c.TrainingJobArn
    CreationTime: c.Timestamp
    TrainingEndTime: c.Timestamp | None = None
    LastModifiedTime: c.Timestamp | None = None
    TrainingJobStatus: c.TrainingJobStatus
    SecondaryStatus: c.SecondaryStatus | None = None
    WarmPoolStatus: _WarmPoolStatus | None = None


class ListTrainingJobsResponse(AwsModel):
    aws_shape = "ListTrainingJobsResponse"
    TrainingJobSummaries: list[TrainingJobSummary]
    NextToken: c.NextToken | None = None


class AddTagsOutput(AwsModel):
    aws_shape = "AddTagsOutput"
    Tags: TagList | None = None


class ListTagsOutput(AwsModel):
    aws_shape = "ListTagsOutput"
    Tags: TagList | None = None
    NextToken: c.NextToken | None = None


class DeleteTagsOutput(AwsModel):
    aws_shape = "DeleteTagsOutput"
