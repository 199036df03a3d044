"""SageMaker request shapes murphy accepts (AWS member names; unknown members are rejected)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from murphy.api.shapes import common as c
from murphy.api.shapes import training as t
from murphy.api.shapes.common import AwsModel, enum, s

TagList = Annotated[list[t.Tag], Field(max_length=50)]


class CreateTrainingJobRequest(AwsModel):
    """AlgorithmSpecification, ResourceConfig and StoppingCondition are optional in the model
    (serverless jobs) but required here, as real SageMaker requires them for ordinary training."""

    aws_shape = "CreateTrainingJobRequest"
    TrainingJobName: c.TrainingJobName
    HyperParameters: t.HyperParameters | None = None
    AlgorithmSpecification: t.AlgorithmSpecification
    RoleArn: c.RoleArn
    InputDataConfig: Annotated[list[t.Channel], Field(min_length=1, max_length=20)] | None = None
    OutputDataConfig: t.OutputDataConfig
    ResourceConfig: t.ResourceConfig
    VpcConfig: t.VpcConfig | None = None
    StoppingCondition: t.StoppingCondition
    Tags: TagList | None = None
    EnableNetworkIsolation: bool | None = None
    EnableInterContainerTrafficEncryption: bool | None = None
    EnableManagedSpotTraining: bool | None = None
    CheckpointConfig: t.CheckpointConfig | None = None
    DebugHookConfig: t.DebugHookConfig | None = None
    DebugRuleConfigurations: Annotated[list[t.DebugRuleConfiguration], Field(max_length=20)] | None = None
    TensorBoardOutputConfig: t.TensorBoardOutputConfig | None = None
    ExperimentConfig: t.ExperimentConfig | None = None
    ProfilerConfig: t.ProfilerConfig | None = None
    ProfilerRuleConfigurations: Annotated[list[t.ProfilerRuleConfiguration], Field(max_length=20)] | None = None
    Environment: t.Environment | None = None
    RetryStrategy: t.RetryStrategy | None = None
    RemoteDebugConfig: t.RemoteDebugConfig | None = None
    InfraCheckConfig: t.InfraCheckConfig | None = None
    SessionChainingConfig: t.SessionChainingConfig | None = None


class DescribeTrainingJobRequest(AwsModel):
    aws_shape = "DescribeTrainingJobRequest"
    TrainingJobName: c.TrainingJobName


class StopTrainingJobRequest(AwsModel):
    aws_shape = "StopTrainingJobRequest"
    TrainingJobName: c.TrainingJobName


class ListTrainingJobsRequest(AwsModel):
    aws_shape = "ListTrainingJobsRequest"
    NextToken: c.NextToken | None = None
    MaxResults: Annotated[int, Field(ge=1, le=100)] | None = None
    CreationTimeAfter: c.Timestamp | None = None
    CreationTimeBefore: c.Timestamp | None = None
    LastModifiedTimeAfter: c.Timestamp | None = None
    LastModifiedTimeBefore: c.Timestamp | None = None
    NameContains: Annotated[str, s(0, 63, r"[a-zA-Z0-9\-]+")] | None = None
    StatusEquals: c.TrainingJobStatus | None = None
    SortBy: Annotated[str, enum("Name", "CreationTime", "Status")] | None = None
    SortOrder: Annotated[str, enum("Ascending", "Descending")] | None = None
    WarmPoolStatusEquals: c.WarmPoolResourceStatus | None = None
    TrainingPlanArnEquals: Annotated[
        str, s(50, 2048, r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.*")
    ] | None = None


class AddTagsInput(AwsModel):
    aws_shape = "AddTagsInput"
    ResourceArn: c.ResourceArn
    Tags: TagList


class ListTagsInput(AwsModel):
    aws_shape = "ListTagsInput"
    ResourceArn: c.ResourceArn
    NextToken: c.NextToken | None = None
    MaxResults: Annotated[int, Field(ge=50)] | None = None


class DeleteTagsInput(AwsModel):
    aws_shape = "DeleteTagsInput"
    ResourceArn: c.ResourceArn
    TagKeys: Annotated[list[c.TagKey], Field(min_length=1, max_length=50)]
