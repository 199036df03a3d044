"""REST for events: /v1/subscriptions, /v1/dead-letters (the SSE stream: test_api_event_stream)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from apihelp import TestClient, aws, training_request
from eventshelp import LiveEvents, Receiver, live_events, wait_for

from murphy.api.app import create_app

ISSUES = {"detail": {"DebugRuleEvaluationStatuses": {"RuleEvaluationStatus": ["IssuesFound"]}}}


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveEvents]:
    live = live_events(tmp_path)
    live.bus.start()
    try:
        yield live
    finally:
        live.bus.close()


@pytest.fixture
def client(live: LiveEvents) -> Iterator[TestClient]:
    with TestClient(live.app) as c:
        yield c


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.start()
    try:
        yield r
    finally:
        r.stop()


def webhook(url: str, **extra: str) -> dict[str, str]:
    return {"type": "webhook", "url": url, **extra}


def test_without_a_bus_every_events_route_answers_503(live: LiveEvents) -> None:
    app = create_app(live.plane.service, live.plane.settings)
    with TestClient(app) as c:
        for method, path in [("GET", "/v1/subscriptions"), ("POST", "/v1/subscriptions"),
                             ("GET", "/v1/subscriptions/x"), ("DELETE", "/v1/subscriptions/x"),
                             ("GET", "/v1/subscriptions/x/dead-letters"), ("POST", "/v1/subscriptions/x/redrive"),
                             ("GET", "/v1/dead-letters"), ("GET", "/v1/events"), ("GET", "/v1/events/stream")]:
            r = c.request(method, path, json={} if method == "POST" else None)
            assert r.status_code == 503, (method, path, r.text)
            assert r.json()["message"] == "Events are not enabled on this server: it was started without an event bus."
        assert c.get("/healthz").status_code == 200


def test_create_list_get_delete(client: TestClient) -> None:
    r = client.post("/v1/subscriptions", json={"name": "pager", "pattern": ISSUES,
                                               "target": webhook("http://127.0.0.1:9/hook", secret="s3cret")})
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["name"] == "pager" and created["id"].startswith("sub-")
    assert created["pattern"] == ISSUES
    assert created["target"] == {"type": "webhook", "url": "http://127.0.0.1:9/hook", "secret": "s3cret"}
    assert created["created_at"].endswith("Z")

    # Without a secret the server makes one; it is shown at creation only.
    made = client.post("/v1/subscriptions", json={"name": "all", "pattern": {"source": ["aws.sagemaker"]},
                                                  "target": webhook("https://example.com/x")}).json()
    assert len(made["target"]["secret"]) >= 32
    listed = client.get("/v1/subscriptions").json()["subscriptions"]
    assert [s["name"] for s in listed] == ["pager", "all"]
    assert all(s["target"]["secret"] == "****" for s in listed)

    by_name, by_id = client.get("/v1/subscriptions/pager"), client.get(f"/v1/subscriptions/{created['id']}")
    assert by_name.status_code == by_id.status_code == 200
    assert by_name.json() == by_id.json() == {**created, "target": {**created["target"], "secret": "****"}}

    assert client.delete("/v1/subscriptions/pager").status_code == 204
    assert [s["name"] for s in client.get("/v1/subscriptions").json()["subscriptions"]] == ["all"]
    r = client.delete("/v1/subscriptions/pager")
    assert r.status_code == 404 and r.json() == {"__type": "ResourceNotFound",
                                                 "message": "No subscription with id or name 'pager'."}


@pytest.mark.parametrize(("body", "message"), [
    ({"name": "x", "pattern": {"detail": {"TrainingJobStatus": "Failed"}}, "target": webhook("http://h/")},
     'Event pattern field "detail.TrainingJobStatus"'),
    ({"name": "x", "pattern": "{not json", "target": webhook("http://h/")}, "The pattern is not valid JSON"),
    ({"name": "x", "pattern": {"source": [{"prefix": 3}]}, "target": webhook("http://h/")}, "prefix"),
    ({"name": "x", "pattern": {"source": ["aws.sagemaker"]}, "target": webhook("not a url")},
     "target.url must be an http:// or https:// URL"),
    ({"name": "x", "pattern": {"source": ["aws.sagemaker"]}, "target": webhook("ftp://h/x")},
     "target.url must be an http:// or https:// URL, not 'ftp://h/x'"),
    ({"name": "x", "pattern": {"source": ["aws.sagemaker"]}, "target": {"type": "sms"}}, "Unknown target type 'sms'"),
    ({"pattern": {"source": ["aws.sagemaker"]}, "target": webhook("http://h/")}, "'name' is required"),
    ({"name": "x", "target": webhook("http://h/")}, "'pattern' is required"),
    ({"name": "x", "pattern": {"source": ["aws.sagemaker"]}}, "'target' is required"),
    ({"name": "x y", "pattern": {"source": ["aws.sagemaker"]}, "target": webhook("http://h/")},
     "Subscription name must be"),
    ({"name": "x", "pattern": {"source": ["a"]}, "target": webhook("http://h/"), "start_seq": -1}, "'start_seq'"),
])
def test_bad_input_is_a_400_saying_what_is_wrong(client: TestClient, body: dict[str, object], message: str) -> None:
    r = client.post("/v1/subscriptions", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["__type"] == "ValidationException"
    assert message in r.json()["message"], r.json()["message"]
    assert client.get("/v1/subscriptions").json() == {"subscriptions": []}


def test_duplicate_name_and_malformed_bodies(client: TestClient) -> None:
    body = {"name": "dup", "pattern": {"source": ["aws.sagemaker"]}, "target": webhook("https://h/")}
    assert client.post("/v1/subscriptions", json=body).status_code == 201
    r = client.post("/v1/subscriptions", json=body)
    assert (r.status_code, r.json()["message"]) == (400, "A subscription named dup already exists")
    r = client.post("/v1/subscriptions", content=b"[1]", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["message"] == "The request body must be a JSON object, not an array."
    r = client.post("/v1/subscriptions/dup/redrive", json={"seqs": ["one"]})
    assert r.status_code == 400 and "'seqs' must be a list" in r.json()["message"]
    for path in ("/v1/subscriptions/nope/dead-letters", "/v1/dead-letters?subscription=nope"):
        assert client.get(path).status_code == 404
    assert client.post("/v1/subscriptions/nope/redrive", json={}).status_code == 404


def test_failing_receiver_dead_letters_then_redrive_delivers(client: TestClient, live: LiveEvents,
                                                            receiver: Receiver) -> None:
    receiver.status = 500
    sub = client.post("/v1/subscriptions", json={"name": "flaky", "pattern": {"source": ["aws.sagemaker"]},
                                                 "target": webhook(receiver.url)}).json()
    aws(client, "SageMaker.CreateTrainingJob", training_request("job-1"))
    aws(client, "SageMaker.CreateTrainingJob", training_request("job-2"))
    letters = wait_for(lambda: len(r := client.get("/v1/subscriptions/flaky/dead-letters").json()["dead_letters"]) == 2
                       and r, what="two dead letters")
    assert [d["event"]["detail"]["TrainingJobName"] for d in letters] == ["job-1", "job-2"]
    first = letters[0]
    assert first["subscription_id"] == sub["id"] and first["attempts"] == 2
    assert first["last_error"].startswith("HTTP 500") and first["event_id"] == first["event"]["id"]
    assert client.get("/v1/dead-letters").json()["dead_letters"] == letters
    assert client.get("/v1/dead-letters", params={"subscription": "flaky"}).json()["dead_letters"] == letters

    receiver.status = 204
    r = client.post("/v1/subscriptions/flaky/redrive", json={"seqs": [letters[1]["seq"]]})
    assert r.json() == {"subscription_id": sub["id"], "redriven": 1}
    wait_for(lambda: len(receiver.bodies) == 1, what="the redriven event")
    assert receiver.bodies[0]["id"] == letters[1]["event_id"]
    r = client.post("/v1/subscriptions/flaky/redrive", json={})
    assert r.json()["redriven"] == 1
    # A queued letter leaves the listing at once (it is "redriving"), before it is delivered:
    # wait for the delivery itself, then for the letter to be gone from both lists.
    assert not client.get("/v1/dead-letters").json()["dead_letters"]
    wait_for(lambda: len(receiver.bodies) == 2, what="the second redriven event")
    wait_for(lambda: not live.bus.store.list_dead_letters(redriving=True), what="no letter left to redrive")
    assert sorted(b["id"] for b in receiver.bodies) == sorted(d["event_id"] for d in letters)


def test_the_outbox_read_by_polling(client: TestClient) -> None:
    for i in range(5):
        aws(client, "SageMaker.CreateTrainingJob", training_request(f"job-{i}"))
    page = client.get("/v1/events", params={"after": 1, "limit": 2}).json()
    assert page["last_seq"] == 5
    assert [(e["seq"], e["event"]["detail"]["TrainingJobName"]) for e in page["events"]] == [(2, "job-1"), (3, "job-2")]
    everything = client.get("/v1/events").json()["events"]
    assert [e["seq"] for e in everything] == [1, 2, 3, 4, 5]
    assert len({e["event"]["id"] for e in everything}) == 5
    odd = client.get("/v1/events", params={"pattern": '{"detail":{"TrainingJobName":["job-1","job-3"]}}'}).json()
    assert [e["seq"] for e in odd["events"]] == [2, 4]
    for params, message in [({"after": "x"}, "'after' must be"), ({"limit": 0}, "'limit' must be between"),
                            ({"pattern": "[]"}, "must be a JSON object")]:
        r = client.get("/v1/events", params=params)
        assert r.status_code == 400 and message in r.json()["message"], r.text[:300]
