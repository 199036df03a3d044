"""CreateTrainingJob with ``ShardedByS3Key`` channels: what murphy accepts and what it refuses,
with SageMaker's wording (through the wire, as a client sees it)."""

from __future__ import annotations

from typing import Any

import pytest
from apihelp import TestClient, aws, error_of, training_request

PATH = "inputDataConfig.{}.member.dataSource.s3DataSource.s3DataDistributionType"


def channel(name: str, distribution: str = "ShardedByS3Key", data_type: str = "S3Prefix",
            mode: str | None = None) -> dict[str, Any]:
    ch: dict[str, Any] = {"ChannelName": name, "DataSource": {"S3DataSource": {
        "S3DataType": data_type, "S3Uri": f"s3://bucket/{name}", "S3DataDistributionType": distribution}}}
    if mode is not None:
        ch["InputMode"] = mode
    return ch


def body(*channels: dict[str, Any], mode: str = "File", name: str = "job-1") -> dict[str, Any]:
    return training_request(name, InputDataConfig=list(channels),
                            AlgorithmSpecification={"TrainingInputMode": mode,
                                                    "TrainingImage": "murphy/linear-regression-demo:latest"},
                            ResourceConfig={"VolumeSizeInGB": 30, "InstanceCount": 2, "InstanceType": "ml.m5.xlarge"})


def create(client: TestClient, request: dict[str, Any]) -> tuple[int, str, str]:
    response = aws(client, "SageMaker.CreateTrainingJob", request)
    if response.status_code == 200:
        return 200, "", ""
    return error_of(response)


@pytest.mark.parametrize(("mode", "channel_mode"), [("File", None), ("FastFile", None), ("Pipe", "File"),
                                                    ("File", "FastFile")])
def test_sharded_prefix_and_manifest_channels_are_accepted(client: TestClient, mode: str,
                                                           channel_mode: str | None) -> None:
    request = body(channel("train", mode=channel_mode), channel("manifest", data_type="ManifestFile", mode=channel_mode),
                   mode=mode)
    assert create(client, request)[0] == 200
    described = aws(client, "SageMaker.DescribeTrainingJob", {"TrainingJobName": "job-1"}).json()
    got = [c["DataSource"]["S3DataSource"]["S3DataDistributionType"] for c in described["InputDataConfig"]]
    assert got == ["ShardedByS3Key", "ShardedByS3Key"]


def test_sharded_with_pipe_input_mode_is_accepted(client: TestClient) -> None:
    # Each host's FIFO streams its share (murphy.container.pipes): job-wide or per channel.
    assert create(client, body(channel("full", "FullyReplicated"), channel("train"), mode="Pipe"))[0] == 200
    assert create(client, body(channel("train", mode="Pipe"), mode="File", name="job-2"))[0] == 200
    described = aws(client, "SageMaker.DescribeTrainingJob", {"TrainingJobName": "job-2"}).json()
    assert [c.get("InputMode") for c in described["InputDataConfig"]] == ["Pipe"]


@pytest.mark.parametrize("data_type", ["AugmentedManifestFile", "Converse"])
def test_sharded_needs_a_prefix_or_a_manifest(client: TestClient, data_type: str) -> None:
    status, code, text = create(client, body(channel("train", data_type=data_type)))
    assert (status, code) == (400, "ValidationException"), text
    assert text == (
        f"1 validation error detected: Value 'ShardedByS3Key' at '{PATH.format(1)}' failed to satisfy constraint: "
        f"ShardedByS3Key is supported by murphy for S3DataType S3Prefix and ManifestFile only (channel train is "
        f"{data_type})")


def test_every_refused_channel_is_reported(client: TestClient) -> None:
    status, _, text = create(client, body(channel("a", data_type="AugmentedManifestFile"),
                                          channel("b", data_type="AugmentedManifestFile"), mode="Pipe"))
    assert status == 400 and text.startswith("2 validation errors detected: ")


def test_fully_replicated_is_untouched(client: TestClient) -> None:
    request = body(channel("train", "FullyReplicated", data_type="AugmentedManifestFile"), mode="Pipe")
    assert create(client, request)[0] == 200
