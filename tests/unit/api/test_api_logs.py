"""CloudWatch Logs subset: DescribeLogStreams and GetLogEvents, over both runtimes' cursors
(FakeRuntime counts events, ProcessRuntime counts bytes)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from apihelp import ACCOUNT, Plane, TestClient, aws, error_of, make_plane, training_request

from murphy.api.app import create_app
from murphy.api.shapes.logs import DescribeLogStreamsResponse, GetLogEventsResponse
from murphy.jobs.service import JobService
from murphy.runtimes.base import Handle
from murphy.runtimes.catalog import ImageCatalog
from murphy.runtimes.process import ProcessRuntime

GROUP = "/aws/sagemaker/TrainingJobs"
T0 = 1_800_000_000_000  # ms
STREAM = "job-1/algo-1-1800000000"


@dataclass
class Logs:
    client: TestClient
    plane: Plane
    add: Callable[[list[tuple[int, str]]], None]


def _fake(tmp_path: Path) -> Iterator[Logs]:
    plane = make_plane(tmp_path)
    with TestClient(create_app(plane.service, plane.settings)) as client:
        assert aws(client, "SageMaker.CreateTrainingJob", training_request("job-1")).status_code == 200
        plane.supervisor.run_once()

        def add(events: list[tuple[int, str]]) -> None:
            for ts, msg in events:
                plane.runtime.add_log("job-1-training", msg, ts)

        yield Logs(client, plane, add)


def _process(tmp_path: Path) -> Iterator[Logs]:
    plane = make_plane(tmp_path)
    runtime = ProcessRuntime(tmp_path / "containers", ImageCatalog(), {})
    plane.service = JobService(plane.store, runtime, plane.settings, clock=plane.clock)
    log = tmp_path / "training.log"
    log.write_text("")
    with TestClient(create_app(plane.service, plane.settings)) as client:
        assert aws(client, "SageMaker.CreateTrainingJob", training_request("job-1")).status_code == 200
        rec = plane.store.get("job-1")
        rec.training = Handle("process", "job-1-training", {"log": str(log)})
        plane.store.update(rec)

        def add(events: list[tuple[int, str]]) -> None:
            with log.open("a") as f:
                for ts, msg in events:
                    f.write(json.dumps({"t": ts, "m": msg}) + "\n")
                f.write("not json: a line the runtime skips\n")

        yield Logs(client, plane, add)


@pytest.fixture(params=["fake", "process"])
def logs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Logs]:
    yield from (_fake if request.param == "fake" else _process)(tmp_path)


def streams(client: TestClient, **body: Any) -> dict[str, Any]:
    r = aws(client, "Logs_20140328.DescribeLogStreams", {"logGroupName": GROUP, **body})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    DescribeLogStreamsResponse.model_validate(out)
    return out


def events(client: TestClient, **body: Any) -> dict[str, Any]:
    r = aws(client, "Logs_20140328.GetLogEvents", {"logGroupName": GROUP, "logStreamName": STREAM, **body})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    GetLogEventsResponse.model_validate(out)
    return out


def messages(page: dict[str, Any]) -> list[str]:
    return [e["message"] for e in page["events"]]


def test_describe_log_streams_as_the_sdk_asks(logs: Logs) -> None:
    out = streams(logs.client, logStreamNamePrefix="job-1/", orderBy="LogStreamName", limit=1)
    assert out == {"logStreams": [{
        "logStreamName": STREAM, "creationTime": T0,
        "arn": f"arn:aws:logs:us-west-2:{ACCOUNT}:log-group:{GROUP}:log-stream:{STREAM}", "storedBytes": 0,
    }]}
    assert streams(logs.client, logStreamNamePrefix="job-2/") == {"logStreams": []}
    arn = f"arn:aws:logs:us-west-2:{ACCOUNT}:log-group:{GROUP}"  # an ARN without the trailing :*
    r = aws(logs.client, "Logs_20140328.DescribeLogStreams", {"logGroupIdentifier": arn})
    assert [s["logStreamName"] for s in r.json()["logStreams"]] == [STREAM]


def test_describe_log_streams_pages_and_orders(logs: Logs) -> None:
    for i in range(2, 6):
        logs.plane.clock.now += 1
        aws(logs.client, "SageMaker.CreateTrainingJob", training_request(f"job-{i}"))
    logs.plane.supervisor.run_once()
    names: list[str] = []
    body: dict[str, Any] = {"limit": 2, "descending": True}
    while True:
        out = streams(logs.client, **body)
        names += [s["logStreamName"] for s in out["logStreams"]]
        if "nextToken" not in out:
            break
        body["nextToken"] = out["nextToken"]
    assert len(names) == 5 and names == sorted(names, reverse=True)
    status, code, text = error_of(aws(logs.client, "Logs_20140328.DescribeLogStreams",
                                      {"logGroupName": GROUP, "limit": 2, "nextToken": body["nextToken"]}))
    assert (status, code) == (400, "InvalidParameterException") and "different parameters" in text


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ({"logGroupName": "/aws/sagemaker/Endpoints"}, "ResourceNotFoundException", "The specified log group does not exist."),
        ({"logGroupName": GROUP, "orderBy": "LastEventTime", "logStreamNamePrefix": "job"}, "InvalidParameterException",
         "Cannot order by LastEventTime with a logStreamNamePrefix."),
        ({"logGroupName": GROUP, "limit": 51}, "InvalidParameterException",
         "1 validation error detected: Value '51' at 'limit' failed to satisfy constraint: Member must have value less than or equal to 50"),
        ({"logGroupName": GROUP, "logGroupIdentifier": GROUP}, "InvalidParameterException",
         "logGroupName and logGroupIdentifier are mutually exclusive: give one."),
        ({}, "InvalidParameterException", "Either logGroupName or logGroupIdentifier is required."),
    ],
)
def test_describe_log_streams_errors(client: TestClient, body: dict[str, Any], code: str, message: str) -> None:
    assert error_of(aws(client, "Logs_20140328.DescribeLogStreams", body)) == (400, code, message)


def test_read_forward_until_an_empty_page_like_the_sdk(logs: Logs) -> None:
    logs.add([(T0 + i, f"line {i}") for i in range(25)])
    got: list[str] = []
    page = events(logs.client, startFromHead=True, limit=10)
    sizes = []
    while page["events"]:
        sizes.append(len(page["events"]))
        got += messages(page)
        token = page["nextForwardToken"]
        page = events(logs.client, startFromHead=True, limit=10, nextToken=token)
    assert sizes == [10, 10, 5] and got == [f"line {i}" for i in range(25)]
    assert page["nextForwardToken"] == token  # the end: the same token comes back
    logs.add([(T0 + 100, "late line")])
    assert messages(events(logs.client, nextToken=token)) == ["late line"]


def test_start_and_end_time(logs: Logs) -> None:
    logs.add([(T0 + i * 1000, f"line {i}") for i in range(10)])
    page = events(logs.client, startFromHead=True, startTime=T0 + 3000, endTime=T0 + 6000)
    assert messages(page) == ["line 3", "line 4", "line 5"]  # start inclusive, end exclusive
    following = events(logs.client, startFromHead=True, startTime=T0 + 3000, endTime=T0 + 6000,
                       nextToken=page["nextForwardToken"])
    assert following["events"] == []
    rest = events(logs.client, nextToken=page["nextForwardToken"])
    assert messages(rest) == [f"line {i}" for i in range(6, 10)]  # the token stopped right before line 6
    skipped = events(logs.client, startFromHead=True, startTime=T0 + 8000, limit=1)
    assert messages(skipped) == ["line 8"]
    assert messages(events(logs.client, nextToken=skipped["nextBackwardToken"])) == [f"line {i}" for i in range(8)]


def test_newest_events_first_then_backwards(logs: Logs) -> None:
    logs.add([(T0 + i, f"line {i}") for i in range(25)])
    page = events(logs.client, limit=10)  # no startFromHead: the newest events, as AWS does
    assert messages(page) == [f"line {i}" for i in range(15, 25)]
    seen = [messages(page)]
    while True:
        token = page["nextBackwardToken"]
        page = events(logs.client, limit=10, nextToken=token)
        if not page["events"]:
            break
        seen.append(messages(page))
    assert [len(s) for s in seen] == [10, 10, 5]
    assert [m for s in reversed(seen) for m in s] == [f"line {i}" for i in range(25)]
    assert page["nextBackwardToken"] == token
    at_end = events(logs.client, limit=10)["nextForwardToken"]
    assert events(logs.client, nextToken=at_end)["events"] == []  # the tail's forward token is at the end


def test_get_log_events_errors(logs: Logs) -> None:
    body = {"logGroupName": GROUP, "logStreamName": "job-1/algo-1-1"}
    assert error_of(aws(logs.client, "Logs_20140328.GetLogEvents", body)) == (
        400, "ResourceNotFoundException", "The specified log stream does not exist.")
    status, code, text = error_of(aws(logs.client, "Logs_20140328.GetLogEvents", {**body, "logStreamName": STREAM,
                                                                                  "nextToken": "x/1"}))
    assert (status, code, text) == (400, "InvalidParameterException", "The specified nextToken is invalid.")
    status, code, text = error_of(aws(logs.client, "Logs_20140328.GetLogEvents", {"logGroupName": GROUP}))
    assert (status, code) == (400, "InvalidParameterException") and "Value null at 'logStreamName'" in text
