"""The AWS JSON 1.1 transport: dispatch, content types, bodies, errors, request ids, callers."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
from apihelp import Plane, TestClient, aws, error_of, training_request

from murphy.api.app import create_app
from murphy.settings import Settings


def test_every_response_carries_a_request_id_and_the_amz_json_type(client: TestClient) -> None:
    ok = aws(client, "SageMaker.ListTrainingJobs", {})
    bad = aws(client, "SageMaker.Nope", {})
    rest = client.get("/healthz")
    ids = [r.headers["x-amzn-RequestId"] for r in (ok, bad, rest)]
    assert all(uuid.UUID(i) for i in ids) and len(set(ids)) == 3
    assert ok.status_code == 200 and ok.headers["content-type"] == "application/x-amz-json-1.1"
    assert bad.headers["content-type"] == "application/x-amz-json-1.1"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (None, "Missing X-Amz-Target header"),
        ("SageMaker.CreateModel", "Unknown operation 'SageMaker.CreateModel'"),
        ("Logs_20140328.PutLogEvents", "Unknown operation 'Logs_20140328.PutLogEvents'"),
        ("DescribeTrainingJob", "Unknown operation 'DescribeTrainingJob'"),
    ],
)
def test_unknown_or_missing_target(client: TestClient, target: str | None, message: str) -> None:
    r = aws(client, target or "", {})
    status, code, text = error_of(r)
    assert (status, code) == (400, "UnknownOperationException")
    assert text.startswith(message)
    assert "SageMaker.DescribeTrainingJob" in text  # says what is served


@pytest.mark.parametrize("content_type", ["application/x-amz-json-1.1", "application/json", "application/json; charset=utf-8"])
def test_json_content_types_are_accepted(client: TestClient, content_type: str) -> None:
    r = aws(client, "SageMaker.ListTrainingJobs", {}, **{"Content-Type": content_type})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_other_content_types_are_a_clear_400(client: TestClient, content_type: str) -> None:
    r = aws(client, "SageMaker.ListTrainingJobs", {}, **{"Content-Type": content_type})
    status, code, text = error_of(r)
    assert (status, code) == (400, "SerializationException")
    assert "Unsupported Content-Type" in text and "application/x-amz-json-1.1" in text


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "The request body is not valid JSON"),
        (b"\xff\xfe", "The request body is not valid JSON"),
        (b'["TrainingJobName"]', "The request body must be a JSON object, not an array."),
        (b'"x"', "The request body must be a JSON object, not a string."),
        (b"null", "The request body must be a JSON object, not null."),
        (b"[" * 100_000 + b"]" * 100_000, "The request body is nested too deeply."),
    ],
)
def test_malformed_bodies_are_a_clear_400(client: TestClient, raw: bytes, message: str) -> None:
    status, code, text = error_of(aws(client, "SageMaker.DescribeTrainingJob", raw))
    assert (status, code) == (400, "SerializationException")
    assert text.startswith(message)


def test_deeply_nested_members_are_a_validation_error(client: TestClient) -> None:
    nested: object = "x"
    for _ in range(500):
        nested = [nested]
    status, code, text = error_of(aws(client, "SageMaker.DescribeTrainingJob", {"TrainingJobName": nested}))
    assert (status, code) == (400, "ValidationException") and "Member must be a string" in text and len(text) < 1000


def test_an_empty_body_is_an_empty_object(client: TestClient) -> None:
    assert aws(client, "SageMaker.ListTrainingJobs", b"").json() == {"TrainingJobSummaries": []}
    status, code, text = error_of(aws(client, "SageMaker.DescribeTrainingJob", b""))
    assert (status, code) == (400, "ValidationException")
    assert text == ("1 validation error detected: Value null at 'trainingJobName' failed to satisfy "
                    "constraint: Member must not be null")


@pytest.fixture
def small_client(plane: Plane) -> Iterator[TestClient]:
    settings = Settings(data_dir=plane.settings.data_dir, runtime="fake", max_body_bytes=1000)
    with TestClient(create_app(plane.service, settings)) as c:
        yield c


def test_an_oversized_body_is_413_whether_declared_or_streamed(small_client: TestClient) -> None:
    big = training_request(HyperParameters={"x": "y" * 2000})
    status, code, text = error_of(aws(small_client, "SageMaker.CreateTrainingJob", big))
    assert (status, code) == (413, "RequestEntityTooLargeException")
    assert "1000-byte limit" in text

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer
        yield b'{"TrainingJobName": "'
        yield b"a" * 2000
        yield b'"}'

    r = small_client.post("/", content=chunks(), headers={
        "Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "SageMaker.DescribeTrainingJob"})
    assert "content-length" not in r.request.headers
    assert error_of(r)[:2] == (413, "RequestEntityTooLargeException")
    assert aws(small_client, "SageMaker.ListTrainingJobs", {}).status_code == 200


def test_region_and_account_come_from_the_credential_scope(client: TestClient) -> None:
    r = aws(client, "SageMaker.CreateTrainingJob", training_request("a"))
    assert r.json() == {"TrainingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:training-job/a"}
    twelve = "AWS4-HMAC-SHA256 Credential=210987654321/20260101/ap-south-1/sagemaker/aws4_request, Signature=0"
    r = aws(client, "SageMaker.CreateTrainingJob", training_request("b"), Authorization=twelve)
    assert r.json() == {"TrainingJobArn": "arn:aws:sagemaker:ap-south-1:210987654321:training-job/b"}
    r = aws(client, "SageMaker.CreateTrainingJob", training_request("c"), Authorization="")
    assert r.json() == {"TrainingJobArn": "arn:aws:sagemaker:eu-west-1:123456789012:training-job/c"}  # defaults


def test_an_unexpected_exception_is_a_logged_500_with_the_request_id(
    client: TestClient, plane: Plane, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(name: str) -> dict[str, object]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(plane.service, "describe_training_job", broken)
    with caplog.at_level(logging.ERROR, logger="murphy.api"):
        r = aws(client, "SageMaker.DescribeTrainingJob", {"TrainingJobName": "x"})
    status, code, text = error_of(r)
    rid = r.headers["x-amzn-RequestId"]
    assert (status, code) == (500, "InternalFailure")
    assert rid in text and "disk on fire" not in text
    assert any(rid in rec.getMessage() and rec.exc_info for rec in caplog.records)


def test_routing_errors_use_the_error_format(client: TestClient) -> None:
    status, code, text = error_of(client.get("/"))
    assert (status, code) == (405, "MethodNotAllowed") and "POST /" in text
    status, code, _ = error_of(client.get("/nowhere"))
    assert (status, code) == (404, "NotFound")
