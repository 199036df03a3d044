"""SageMaker operations through the wire: create/describe/stop/list, pagination, tags."""

from __future__ import annotations

from typing import Any

import pytest
from apihelp import ACCOUNT, Plane, TestClient, aws, error_of, training_request

from murphy.api.shapes.responses import DescribeTrainingJobResponse, ListTrainingJobsResponse

ARN = f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:training-job/"


def create(client: TestClient, name: str, **extra: Any) -> None:
    r = aws(client, "SageMaker.CreateTrainingJob", training_request(name, **extra))
    assert r.status_code == 200, r.text


def describe(client: TestClient, name: str) -> dict[str, Any]:
    r = aws(client, "SageMaker.DescribeTrainingJob", {"TrainingJobName": name})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def list_jobs(client: TestClient, **body: Any) -> dict[str, Any]:
    r = aws(client, "SageMaker.ListTrainingJobs", body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    ListTrainingJobsResponse.model_validate(out)
    return out


def test_create_then_describe_matches_the_response_shape(client: TestClient, plane: Plane) -> None:
    r = aws(client, "SageMaker.CreateTrainingJob", training_request("job-1"))
    assert r.json() == {"TrainingJobArn": ARN + "job-1"}
    job = describe(client, "job-1")
    DescribeTrainingJobResponse.model_validate(job)
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("InProgress", "Starting")
    assert job["CreationTime"] == plane.clock.now  # epoch seconds, a number
    assert job["DebugRuleEvaluationStatuses"][0]["RuleConfigurationName"] == "ExplodingTensor"
    assert job["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "InProgress"
    assert job["SecondaryStatusTransitions"][0]["StatusMessage"]
    assert job["ModelArtifacts"] == {"S3ModelArtifacts": "s3://bucket/out/job-1/output/model.tar.gz"}


def test_duplicate_and_unknown_jobs(client: TestClient) -> None:
    create(client, "job-1")
    assert error_of(aws(client, "SageMaker.CreateTrainingJob", training_request("job-1"))) == (
        400, "ResourceInUse",
        "Training job names must be unique within an AWS account and region, and a training job with this "
        f"name already exists ({ARN}job-1)",
    )
    for target in ("SageMaker.DescribeTrainingJob", "SageMaker.StopTrainingJob"):
        assert error_of(aws(client, target, {"TrainingJobName": "nope"})) == (
            400, "ValidationException", "Requested resource not found.")


def test_stop_then_stop_a_finished_job(client: TestClient, plane: Plane) -> None:
    create(client, "job-1")
    plane.supervisor.run_once()
    r = aws(client, "SageMaker.StopTrainingJob", {"TrainingJobName": "job-1"})
    assert (r.status_code, r.json()) == (200, {})
    assert describe(client, "job-1")["TrainingJobStatus"] == "Stopping"
    for _ in range(3):
        plane.clock.now += 1
        plane.supervisor.run_once()
    job = describe(client, "job-1")
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")
    DescribeTrainingJobResponse.model_validate(job)  # end times, rule statuses, billable seconds
    assert error_of(aws(client, "SageMaker.StopTrainingJob", {"TrainingJobName": "job-1"})) == (
        400, "ValidationException", "The request was rejected because the training job is in status Stopped.")


@pytest.fixture
def jobs(client: TestClient, plane: Plane) -> list[str]:
    names = [f"job-{i:02d}" for i in range(25)]
    for name in names:
        create(client, name)
        plane.clock.now += 10
    return names


def test_pages_of_ten_by_default_with_an_opaque_token(client: TestClient, jobs: list[str]) -> None:
    seen: list[str] = []
    body: dict[str, Any] = {}
    pages = []
    while True:
        page = list_jobs(client, **body)
        pages.append(len(page["TrainingJobSummaries"]))
        seen += [s["TrainingJobName"] for s in page["TrainingJobSummaries"]]
        if "NextToken" not in page:
            break
        assert not page["NextToken"].isdigit()  # opaque, not a bare offset
        body = {"NextToken": page["NextToken"]}
    assert pages == [10, 10, 5]
    assert seen == jobs  # CreationTime ascending by default


def test_filters_sort_and_max_results(client: TestClient, plane: Plane, jobs: list[str]) -> None:
    page = list_jobs(client, MaxResults=3, SortBy="Name", SortOrder="Descending")
    assert [s["TrainingJobName"] for s in page["TrainingJobSummaries"]] == ["job-24", "job-23", "job-22"]
    assert [s["TrainingJobName"] for s in list_jobs(client, NameContains="job-1")["TrainingJobSummaries"]] == jobs[10:20]
    first = 1_800_000_000.0
    after = list_jobs(client, CreationTimeAfter=first + 225, MaxResults=100)["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in after] == jobs[23:]
    iso = "2027-01-15T08:03:20Z"  # 1_800_000_200 (epoch 1_800_000_000 is 08:00:00Z)
    before = list_jobs(client, CreationTimeBefore=iso, MaxResults=100)["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in before] == jobs[:20]
    aws(client, "SageMaker.StopTrainingJob", {"TrainingJobName": "job-07"})
    stopping = list_jobs(client, StatusEquals="Stopping")["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in stopping] == ["job-07"]
    assert list_jobs(client, StatusEquals="Deleting") == {"TrainingJobSummaries": []}
    assert list_jobs(client, WarmPoolStatusEquals="InUse") == {"TrainingJobSummaries": []}


def test_a_token_only_works_with_the_filters_it_was_issued_for(client: TestClient, jobs: list[str]) -> None:
    token = list_jobs(client, NameContains="job")["NextToken"]
    assert list_jobs(client, NameContains="job", NextToken=token, MaxResults=2)["TrainingJobSummaries"][0][
        "TrainingJobName"] == "job-10"  # page size may change between pages
    status, code, text = error_of(aws(client, "SageMaker.ListTrainingJobs", {"NameContains": "job-1", "NextToken": token}))
    assert (status, code) == (400, "ValidationException") and "different parameters" in text
    status, code, text = error_of(aws(client, "SageMaker.ListTrainingJobs", {"NextToken": "garbage!"}))
    assert (status, code) == (400, "ValidationException") and "Invalid pagination token" in text


def test_tags(client: TestClient) -> None:
    create(client, "job-1", Tags=[{"Key": "team", "Value": "a"}])
    arn = ARN + "job-1"
    r = aws(client, "SageMaker.AddTags", {"ResourceArn": arn, "Tags": [{"Key": "env", "Value": "dev"}]})
    assert r.json() == {"Tags": [{"Key": "env", "Value": "dev"}]}
    r = aws(client, "SageMaker.ListTags", {"ResourceArn": arn})
    assert r.json() == {"Tags": [{"Key": "team", "Value": "a"}, {"Key": "env", "Value": "dev"}]}
    assert aws(client, "SageMaker.DeleteTags", {"ResourceArn": arn, "TagKeys": ["team"]}).json() == {}
    assert aws(client, "SageMaker.ListTags", {"ResourceArn": arn, "MaxResults": 50}).json() == {
        "Tags": [{"Key": "env", "Value": "dev"}]}
    status, code, text = error_of(aws(client, "SageMaker.ListTags", {"ResourceArn": arn, "MaxResults": 10}))
    assert (status, code) == (400, "ValidationException") and "greater than or equal to 50" in text
    status, code, text = error_of(aws(client, "SageMaker.ListTags", {"ResourceArn": ARN + "nope"}))
    assert (status, code, text) == (400, "ValidationException", "Requested resource not found.")
    status, code, text = error_of(aws(client, "SageMaker.AddTags", {"ResourceArn": "arn:aws:s3:::bucket", "Tags": []}))
    assert (status, code) == (400, "ValidationException") and "at 'resourceArn'" in text
