"""DescribeTrainingJob bodies as the stock SageMaker SDK reads them."""

from __future__ import annotations

from typing import Any

from murphy.jobs.describe import describe
from murphy.jobs.model import JobRecord


def record(output_config: dict[str, Any]) -> JobRecord:
    spec = {
        "AlgorithmSpecification": {"TrainingImage": "murphy/linear-regression-demo:latest", "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "OutputDataConfig": output_config,
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
    }
    return JobRecord.new("job-1", "arn:aws:sagemaker:us-west-2:123456789012:training-job/job-1",
                         "123456789012", "us-west-2", spec, now=1_800_000_000.0)


def test_output_config_has_an_empty_kms_key_when_the_request_had_none() -> None:
    """AWS echoes ``KmsKeyId: ""``; ``Estimator.attach()`` indexes it and raised KeyError."""
    rec = record({"S3OutputPath": "s3://bucket/out"})
    body = describe(rec)
    assert body["OutputDataConfig"] == {"KmsKeyId": "", "S3OutputPath": "s3://bucket/out"}
    assert rec.spec["OutputDataConfig"] == {"S3OutputPath": "s3://bucket/out"}  # the stored request is untouched


def test_a_given_kms_key_is_echoed_as_is() -> None:
    config = {"S3OutputPath": "s3://bucket/out", "KmsKeyId": "alias/mine", "CompressionType": "NONE"}
    assert describe(record(config))["OutputDataConfig"] == config
