"""Sub-shapes of CreateTrainingJob (also echoed by DescribeTrainingJob).

A field named like its type (``DataSource: DataSource | None = None``) would shadow the type in
its own annotation, so annotations go through ``c.`` (common) or a ``_``-prefixed alias.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from murphy.api.shapes import common as c
from murphy.api.shapes.common import AwsModel, enum, s

_Str256 = Annotated[str, s(0, 256)]
_HookParameters = Annotated[dict[c.ConfigKey, c.ConfigValue], Field(max_length=20)]


class MetricDefinition(AwsModel):
    aws_shape = "MetricDefinition"
    Name: Annotated[str, s(1, 255, r".+")]
    Regex: Annotated[str, s(1, 500, r".+")]


class TrainingRepositoryAuthConfig(AwsModel):
    aws_shape = "TrainingRepositoryAuthConfig"
    TrainingRepositoryCredentialsProviderArn: Annotated[
        str, s(1, 2048, r"arn:[\p{Alnum}\-]+:lambda:[\p{Alnum}\-]+:[0-9]{12}:function:.*")
    ]


_TrainingRepositoryAuthConfig = TrainingRepositoryAuthConfig


class TrainingImageConfig(AwsModel):
    aws_shape = "TrainingImageConfig"
    TrainingRepositoryAccessMode: Annotated[str, enum("Platform", "Vpc")]
    TrainingRepositoryAuthConfig: _TrainingRepositoryAuthConfig | None = None


_TrainingImageConfig = TrainingImageConfig


class AlgorithmSpecification(AwsModel):
    aws_shape = "AlgorithmSpecification"
    # Optional in the model; murphy has no built-in algorithms, so validation requires it.
    TrainingImage: c.ImageUri | None = None
    AlgorithmName: Annotated[
        str, s(1, 170, r"(arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:[a-z\-]*\/)?([a-zA-Z0-9]([a-zA-Z0-9-]){0,62})(?<!-)")
    ] | None = None
    TrainingInputMode: c.TrainingInputMode
    MetricDefinitions: Annotated[list[MetricDefinition], Field(max_length=40)] | None = None
    EnableSageMakerMetricsTimeSeries: bool | None = None
    ContainerEntrypoint: Annotated[list[_Str256], Field(min_length=1, max_length=100)] | None = None
    ContainerArguments: Annotated[list[_Str256], Field(min_length=1, max_length=100)] | None = None
    TrainingImageConfig: _TrainingImageConfig | None = None


class S3DataSource(AwsModel):
    aws_shape = "S3DataSource"
    S3DataType: Annotated[str, enum("ManifestFile", "S3Prefix", "AugmentedManifestFile", "Converse")]
    S3Uri: c.S3Uri
    S3DataDistributionType: Annotated[str, enum("FullyReplicated", "ShardedByS3Key")] | None = None
    AttributeNames: Annotated[list[Annotated[str, s(1, 256, r".+")]], Field(max_length=16)] | None = None
    InstanceGroupNames: Annotated[list[Annotated[str, s(1, 64, r".+")]], Field(max_length=5)] | None = None


_S3DataSource = S3DataSource


class FileSystemDataSource(AwsModel):
    aws_shape = "FileSystemDataSource"
    FileSystemId: Annotated[str, s(11, 21, r"(fs-[0-9a-f]{8,})")]
    FileSystemAccessMode: Annotated[str, enum("rw", "ro")]
    FileSystemType: Annotated[str, enum("EFS", "FSxLustre")]
    DirectoryPath: c.DirectoryPath


_FileSystemDataSource = FileSystemDataSource


class DataSource(AwsModel):
    aws_shape = "DataSource"
    S3DataSource: _S3DataSource | None = None
    FileSystemDataSource: _FileSystemDataSource | None = None


_DataSource = DataSource


class ShuffleConfig(AwsModel):
    aws_shape = "ShuffleConfig"
    Seed: int


_ShuffleConfig = ShuffleConfig


class Channel(AwsModel):
    aws_shape = "Channel"
    ChannelName: Annotated[str, s(1, 64, r"[A-Za-z0-9\.\-_]+")]
    DataSource: _DataSource
    ContentType: _Str256 | None = None
    CompressionType: Annotated[str, enum("None", "Gzip")] | None = None
    RecordWrapperType: Annotated[str, enum("None", "RecordIO")] | None = None
    InputMode: c.TrainingInputMode | None = None
    ShuffleConfig: _ShuffleConfig | None = None


class OutputDataConfig(AwsModel):
    aws_shape = "OutputDataConfig"
    KmsKeyId: c.KmsKeyId | None = None
    S3OutputPath: c.S3Uri
    CompressionType: Annotated[str, enum("GZIP", "NONE")] | None = None


class InstanceGroup(AwsModel):
    aws_shape = "InstanceGroup"
    InstanceType: c.TrainingInstanceType
    InstanceCount: c.NonNegativeInt
    InstanceGroupName: Annotated[str, s(1, 64, r".+")]


class ResourceConfig(AwsModel):
    aws_shape = "ResourceConfig"
    InstanceType: c.TrainingInstanceType | None = None
    InstanceCount: c.NonNegativeInt | None = None
    VolumeSizeInGB: c.NonNegativeInt | None = None
    VolumeKmsKeyId: c.KmsKeyId | None = None
    KeepAlivePeriodInSeconds: Annotated[int, Field(ge=0, le=21600)] | None = None
    InstanceGroups: Annotated[list[InstanceGroup], Field(max_length=5)] | None = None


class VpcConfig(AwsModel):
    aws_shape = "VpcConfig"
    SecurityGroupIds: Annotated[list[Annotated[str, s(0, 32, r"[-0-9a-zA-Z]+")]], Field(min_length=1, max_length=5)]
    Subnets: Annotated[list[Annotated[str, s(0, 32, r"[-0-9a-zA-Z]+")]], Field(min_length=1, max_length=16)]


class StoppingCondition(AwsModel):
    aws_shape = "StoppingCondition"
    MaxRuntimeInSeconds: c.PositiveInt | None = None
    MaxWaitTimeInSeconds: c.PositiveInt | None = None
    MaxPendingTimeInSeconds: Annotated[int, Field(ge=1800, le=2419200)] | None = None


class Tag(AwsModel):
    aws_shape = "Tag"
    Key: c.TagKey
    Value: c.TagValue


class CheckpointConfig(AwsModel):
    aws_shape = "CheckpointConfig"
    S3Uri: c.S3Uri
    LocalPath: c.DirectoryPath | None = None


class CollectionConfiguration(AwsModel):
    aws_shape = "CollectionConfiguration"
    CollectionName: c.ConfigKey | None = None
    CollectionParameters: _HookParameters | None = None


class DebugHookConfig(AwsModel):
    aws_shape = "DebugHookConfig"
    LocalPath: c.DirectoryPath | None = None
    S3OutputPath: c.S3Uri
    HookParameters: _HookParameters | None = None
    CollectionConfigurations: Annotated[list[CollectionConfiguration], Field(max_length=20)] | None = None


_RuleParameters = Annotated[dict[c.ConfigKey, c.ConfigValue], Field(max_length=100)]


class DebugRuleConfiguration(AwsModel):
    aws_shape = "DebugRuleConfiguration"
    RuleConfigurationName: c.ConfigKey
    LocalPath: c.DirectoryPath | None = None
    S3OutputPath: c.S3Uri | None = None
    RuleEvaluatorImage: c.ImageUri
    InstanceType: c.ProcessingInstanceType | None = None
    VolumeSizeInGB: c.NonNegativeInt | None = None
    RuleParameters: _RuleParameters | None = None


class ProfilerRuleConfiguration(DebugRuleConfiguration):
    aws_shape = "ProfilerRuleConfiguration"


class ProfilerConfig(AwsModel):
    aws_shape = "ProfilerConfig"
    S3OutputPath: c.S3Uri | None = None
    ProfilingIntervalInMilliseconds: int | None = None
    ProfilingParameters: _HookParameters | None = None
    DisableProfiler: bool | None = None


class TensorBoardOutputConfig(AwsModel):
    aws_shape = "TensorBoardOutputConfig"
    LocalPath: c.DirectoryPath | None = None
    S3OutputPath: c.S3Uri


class ExperimentConfig(AwsModel):
    aws_shape = "ExperimentConfig"
    ExperimentName: c.ExperimentEntityName | None = None
    TrialName: c.ExperimentEntityName | None = None
    TrialComponentDisplayName: c.ExperimentEntityName | None = None
    RunName: c.ExperimentEntityName | None = None


class RetryStrategy(AwsModel):
    aws_shape = "RetryStrategy"
    MaximumRetryAttempts: Annotated[int, Field(ge=1, le=30)]


class RemoteDebugConfig(AwsModel):
    aws_shape = "RemoteDebugConfig"
    EnableRemoteDebug: bool | None = None


class InfraCheckConfig(AwsModel):
    aws_shape = "InfraCheckConfig"
    EnableInfraCheck: bool | None = None


class SessionChainingConfig(AwsModel):
    aws_shape = "SessionChainingConfig"
    EnableSessionTagChaining: bool | None = None


HyperParameters = Annotated[dict[Annotated[str, s(0, 256)], Annotated[str, s(0, 2500)]], Field(max_length=100)]
Environment = Annotated[
    dict[Annotated[str, s(0, 512, r"[a-zA-Z_][a-zA-Z0-9_]*")], Annotated[str, s(0, 512, r"[\S\s]*")]],
    Field(max_length=100),
]
