"""Black box: a real uvicorn server on 127.0.0.1 and the stock boto3 clients (sagemaker, logs)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import uvicorn
from apihelp import ACCOUNT, Plane, make_plane, training_request
from botocore.exceptions import ClientError

from murphy.api.app import create_app

REGION = "us-west-2"


class Server:
    def __init__(self, plane: Plane) -> None:
        self.plane = plane
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(create_app(plane.service, plane.settings), log_level="warning", lifespan="off",
                                access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.url, region_name=REGION,
                            aws_access_key_id="test", aws_secret_access_key="test")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with Server(make_plane(Path(tmp_path_factory.mktemp("boto3")))) as srv:
        yield srv


@pytest.fixture(scope="module")
def sm(server: Server) -> Any:
    return server.client("sagemaker")


def error(e: pytest.ExceptionInfo[ClientError]) -> tuple[str, str, int]:
    err = e.value.response["Error"]
    return err["Code"], err["Message"], e.value.response["ResponseMetadata"]["HTTPStatusCode"]


def test_create_describe_stop_and_wait(server: Server, sm: Any) -> None:
    out = sm.create_training_job(**training_request("bb-job"))
    assert out["TrainingJobArn"] == f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/bb-job"
    assert len(out["ResponseMetadata"]["RequestId"]) == 36
    job = sm.describe_training_job(TrainingJobName="bb-job")
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("InProgress", "Starting")
    assert job["CreationTime"].timestamp() == server.plane.clock.now  # parsed as a datetime by botocore
    assert [r["RuleEvaluationStatus"] for r in job["DebugRuleEvaluationStatuses"]] == ["InProgress"]
    assert job["HyperParameters"] == training_request()["HyperParameters"]
    server.plane.supervisor.run_once()
    sm.stop_training_job(TrainingJobName="bb-job")
    for _ in range(3):
        server.plane.supervisor.run_once()
    waiter = sm.get_waiter("training_job_completed_or_stopped")
    waiter.wait(TrainingJobName="bb-job", WaiterConfig={"Delay": 0.05, "MaxAttempts": 5})
    job = sm.describe_training_job(TrainingJobName="bb-job")
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert all("StatusMessage" in t for t in job["SecondaryStatusTransitions"])
    with pytest.raises(ClientError) as e:
        sm.stop_training_job(TrainingJobName="bb-job")
    assert error(e) == ("ValidationException", "The request was rejected because the training job is in status Stopped.", 400)


def test_error_codes(sm: Any) -> None:
    sm.create_training_job(**training_request("bb-dup"))
    with pytest.raises(sm.exceptions.ResourceInUse) as e:
        sm.create_training_job(**training_request("bb-dup"))
    assert error(e)[1].endswith(f"already exists (arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/bb-dup)")
    with pytest.raises(ClientError) as e:
        sm.describe_training_job(TrainingJobName="bb-missing")
    assert error(e) == ("ValidationException", "Requested resource not found.", 400)
    with pytest.raises(ClientError) as e:
        sm.describe_training_job(TrainingJobName="bad_name")
    assert error(e) == ("ValidationException",
                        "1 validation error detected: Value 'bad_name' at 'trainingJobName' failed to satisfy "
                        "constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", 400)
    with pytest.raises(ClientError) as e:
        sm.create_training_job(**training_request("bb-rules", rules=21))
    assert error(e)[1].endswith("at 'debugRuleConfigurations' failed to satisfy constraint: "
                                "Member must have length less than or equal to 20")


def test_list_and_paginate(server: Server, sm: Any) -> None:
    names = [f"pg-{i:02d}" for i in range(23)]
    for name in names:
        server.plane.clock.now += 1
        sm.create_training_job(**training_request(name))
    first = sm.list_training_jobs(NameContains="pg-")
    assert len(first["TrainingJobSummaries"]) == 10 and "NextToken" in first
    pages = sm.get_paginator("list_training_jobs").paginate(NameContains="pg-", PaginationConfig={"PageSize": 5})
    sizes, seen = [], []
    for page in pages:
        sizes.append(len(page["TrainingJobSummaries"]))
        seen += [s["TrainingJobName"] for s in page["TrainingJobSummaries"]]
    assert sizes == [5, 5, 5, 5, 3] and seen == names
    newest = sm.list_training_jobs(NameContains="pg-", SortOrder="Descending", MaxResults=2)["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in newest] == ["pg-22", "pg-21"]
    with pytest.raises(ClientError) as e:
        sm.list_training_jobs(NameContains="pg-1", NextToken=first["NextToken"])
    assert error(e)[0] == "ValidationException"


def test_tags(sm: Any) -> None:
    arn = sm.create_training_job(**training_request("bb-tags", Tags=[{"Key": "team", "Value": "a"}]))["TrainingJobArn"]
    assert sm.add_tags(ResourceArn=arn, Tags=[{"Key": "env", "Value": "dev"}])["Tags"] == [{"Key": "env", "Value": "dev"}]
    assert sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "team", "Value": "a"}, {"Key": "env", "Value": "dev"}]
    sm.delete_tags(ResourceArn=arn, TagKeys=["team"])
    tags = [t for page in sm.get_paginator("list_tags").paginate(ResourceArn=arn) for t in page["Tags"]]
    assert tags == [{"Key": "env", "Value": "dev"}]


def test_logs_as_the_sdk_reads_them(server: Server, sm: Any) -> None:
    logs = server.client("logs")
    group = "/aws/sagemaker/TrainingJobs"
    sm.create_training_job(**training_request("bb-logs"))
    with pytest.raises(logs.exceptions.ResourceNotFoundException):
        logs.describe_log_streams(logGroupName="/aws/sagemaker/Nope")
    assert logs.describe_log_streams(logGroupName=group, logStreamNamePrefix="bb-logs/")["logStreams"] == []
    server.plane.supervisor.run_once()
    t0 = int(server.plane.clock.now * 1000)
    for i in range(12):
        server.plane.runtime.add_log("bb-logs-training", f"step {i}", t0 + i)
    streams = logs.describe_log_streams(logGroupName=group, logStreamNamePrefix="bb-logs/",
                                        orderBy="LogStreamName", limit=1)["logStreams"]
    assert [s["logStreamName"] for s in streams] == [f"bb-logs/algo-1-{int(server.plane.clock.now)}"]
    got: list[str] = []
    kwargs: dict[str, Any] = {"logGroupName": group, "logStreamName": streams[0]["logStreamName"],
                              "startTime": t0 + 2, "startFromHead": True, "limit": 4}
    while True:
        page = logs.get_log_events(**kwargs)
        if not page["events"]:
            assert page["nextForwardToken"] == kwargs["nextToken"]
            break
        got += [e["message"] for e in page["events"]]
        kwargs["nextToken"] = page["nextForwardToken"]
    assert got == [f"step {i}" for i in range(2, 12)]
    with pytest.raises(logs.exceptions.InvalidParameterException):
        logs.get_log_events(logGroupName=group, logStreamName=streams[0]["logStreamName"], nextToken="nope")
