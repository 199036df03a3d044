"""REST mirror, /healthz and /metrics."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from apihelp import Plane, TestClient, aws, make_plane, training_request

from murphy.api.app import create_app
from murphy.jobs.service import JobService
from murphy.store.sql import SqlJobStore


def test_rest_mirrors_the_wire_bodies(client: TestClient, plane: Plane) -> None:
    for i in range(3):
        aws(client, "SageMaker.CreateTrainingJob", training_request(f"job-{i}"))
        plane.clock.now += 1
    wire = aws(client, "SageMaker.DescribeTrainingJob", {"TrainingJobName": "job-1"}).json()
    rest = client.get("/v1/training-jobs/job-1")
    assert rest.status_code == 200 and rest.headers["content-type"] == "application/json"
    assert rest.json() == wire
    page = client.get("/v1/training-jobs", params={"max_results": 2, "name_contains": "job"}).json()
    assert page == aws(client, "SageMaker.ListTrainingJobs", {"MaxResults": 2, "NameContains": "job"}).json()
    assert [s["TrainingJobName"] for s in page["TrainingJobSummaries"]] == ["job-0", "job-1"]
    rest_next = client.get("/v1/training-jobs", params={"max_results": 2, "name_contains": "job",
                                                        "next_token": page["NextToken"]}).json()
    assert [s["TrainingJobName"] for s in rest_next["TrainingJobSummaries"]] == ["job-2"]
    newest = client.get("/v1/training-jobs", params={"sort_order": "Descending", "max_results": 1}).json()
    assert newest["TrainingJobSummaries"][0]["TrainingJobName"] == "job-2"


def test_rest_stop_and_status_codes(client: TestClient, plane: Plane) -> None:
    aws(client, "SageMaker.CreateTrainingJob", training_request("job-1"))
    plane.supervisor.run_once()
    r = client.post("/v1/training-jobs/job-1/stop")
    assert (r.status_code, r.json()) == (200, {})
    assert client.get("/v1/training-jobs", params={"status": "Stopping"}).json()["TrainingJobSummaries"][0][
        "TrainingJobName"] == "job-1"
    for _ in range(3):
        plane.supervisor.run_once()
    r = client.post("/v1/training-jobs/job-1/stop")
    assert r.status_code == 409 and r.json()["__type"] == "ValidationException"
    r = client.get("/v1/training-jobs/nope")
    assert (r.status_code, r.json()) == (404, {"__type": "ValidationException", "message": "Requested resource not found."})
    r = client.get("/v1/training-jobs/bad_name")
    assert r.status_code == 400 and "at 'trainingJobName'" in r.json()["message"]
    r = client.get("/v1/training-jobs", params={"max_results": "lots", "status": "Done"})
    assert r.status_code == 400 and r.json()["message"].startswith("2 validation errors detected")


def test_healthz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}


@pytest.fixture
def down_client(tmp_path: Path) -> Iterator[TestClient]:
    """An app whose SQLite database has vanished (its directory deleted under it)."""
    (tmp_path / "db").mkdir()
    store = SqlJobStore(f"sqlite:///{tmp_path}/db/murphy.db")
    plane = make_plane(tmp_path)
    service = JobService(store, plane.runtime, plane.settings)
    with TestClient(create_app(service, plane.settings)) as c:
        assert c.get("/healthz").status_code == 200
        store.close()
        shutil.rmtree(tmp_path / "db")
        yield c


def test_healthz_and_metrics_say_when_the_store_is_down(down_client: TestClient) -> None:
    r = down_client.get("/healthz")
    assert r.status_code == 503 and r.json()["status"] == "unavailable"
    assert "unable to open database file" in r.json()["error"]
    assert down_client.get("/metrics").status_code == 503
    # A store outage is retryable for botocore (a 5xx), not an InternalFailure.
    r = aws(down_client, "SageMaker.DescribeTrainingJob", {"TrainingJobName": "job-1"})
    assert (r.status_code, r.json()["__type"]) == (503, "ServiceUnavailable")
    assert down_client.get("/v1/training-jobs").status_code == 503


def _sample(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    m = re.search(rf"^{re.escape(name)}\{{{re.escape(want)}\}} (\S+)$", text, re.M)
    assert m, f"{name}{{{want}}} not in metrics"
    return float(m.group(1))


def test_metrics(client: TestClient, plane: Plane) -> None:
    aws(client, "SageMaker.CreateTrainingJob", training_request("job-1", rules=2))
    aws(client, "SageMaker.CreateTrainingJob", training_request("job-2"))
    plane.supervisor.run_once()
    client.post("/v1/training-jobs/job-2/stop")
    for _ in range(3):
        aws(client, "SageMaker.DescribeTrainingJob", {"TrainingJobName": "job-1"})
    aws(client, "SageMaker.DescribeTrainingJob", {"TrainingJobName": "nope"})
    aws(client, "SageMaker.Nope", {})
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert _sample(text, "murphy_training_jobs", status="InProgress") == 1
    assert _sample(text, "murphy_training_jobs", status="Stopping") == 1
    assert _sample(text, "murphy_training_jobs", status="Completed") == 0
    assert _sample(text, "murphy_rule_evaluations", status="InProgress") == 2
    assert _sample(text, "murphy_rule_evaluations", status="Stopping") == 1
    assert _sample(text, "murphy_api_request_duration_seconds_count", operation="SageMaker.DescribeTrainingJob") == 4
    assert _sample(text, "murphy_api_request_duration_seconds_count", operation="rest.StopTrainingJob") == 1
    assert _sample(text, "murphy_api_request_duration_seconds_count", operation="unknown") == 1
    assert _sample(text, "murphy_api_errors_total", code="ValidationException", operation="SageMaker.DescribeTrainingJob") == 1


def test_each_app_has_its_own_registry(tmp_path: Path) -> None:
    a, b = make_plane(tmp_path / "a"), make_plane(tmp_path / "b")
    with TestClient(create_app(a.service, a.settings)) as ca, TestClient(create_app(b.service, b.settings)) as cb:
        aws(ca, "SageMaker.ListTrainingJobs", {})
        assert _sample(ca.get("/metrics").text, "murphy_api_request_duration_seconds_count",
                       operation="SageMaker.ListTrainingJobs") == 1
        assert "SageMaker.ListTrainingJobs" not in cb.get("/metrics").text
