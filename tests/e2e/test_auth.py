"""Issue 18 §1/§5: a real ``murphy server --auth sigv4`` and the stock boto3 client.

Right key works (SageMaker, CloudWatch Logs, the REST mirror and the event routes); wrong
secret, unknown key, tampered body, a request replayed after the skew window, a missing or
incomplete Authorization header, a disabled key and a wrong session token are each refused
with AWS's code and message. Keys come from the real ``murphy keys`` CLI on the server's data dir.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import botocore.auth
import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from murphy_server import MakeServer, MurphyServer

ACCOUNT_A = "111111111111"
BAD_SIGNATURE = ("The request signature we calculated does not match the signature you provided. "
                 "Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
NO_RETRY = Config(retries={"max_attempts": 1, "mode": "standard"})


def keys(data_dir: Path, *args: str) -> Any:
    out = subprocess.run([sys.executable, "-m", "murphy.cli", "keys", "--data-dir", str(data_dir), *args],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out) if out.strip() else None


def client(server: MurphyServer, akid: str, secret: str, service: str = "sagemaker", token: str | None = None) -> Any:
    return boto3.client(service, endpoint_url=server.endpoint, region_name="eu-west-1", config=NO_RETRY,
                        aws_access_key_id=akid, aws_secret_access_key=secret, aws_session_token=token)


def error_of(call: Any) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as info:
        call()
    err = info.value.response
    return err["Error"]["Code"], err["Error"]["Message"], err["ResponseMetadata"]["HTTPStatusCode"]


@pytest.fixture
def auth_server(make_server: MakeServer, tmp_path: Path) -> tuple[MurphyServer, dict[str, str]]:
    data = tmp_path / "murphy"
    key = keys(data, "create", "--account", ACCOUNT_A, "--name", "alice")["AccessKey"]
    server = make_server("--auth", "sigv4", "--runtime", "fake", data_dir=data,
                         env={"MURPHY_AUTH_KEY_CACHE_S": "0"})
    return server, key


def test_create_prints_the_key_once_like_iam(auth_server: tuple[MurphyServer, dict[str, str]]) -> None:
    server, key = auth_server
    assert key["AccessKeyId"].startswith("AKIA") and len(key["AccessKeyId"]) == 20
    assert len(key["SecretAccessKey"]) == 40 and key["Status"] == "Active" and key["UserName"] == "alice"
    listed = keys(server.data_dir, "list")["AccessKeyMetadata"]
    assert [k["AccessKeyId"] for k in listed] == [key["AccessKeyId"]]
    # The secret is nowhere but in the one answer: not in the listing, the database or the log.
    assert key["SecretAccessKey"] not in json.dumps(listed)
    assert key["SecretAccessKey"].encode() not in (server.data_dir / "murphy.db").read_bytes()
    assert key["SecretAccessKey"] not in server.log()


def test_right_key_works_on_every_protocol(auth_server: tuple[MurphyServer, dict[str, str]]) -> None:
    server, key = auth_server
    sm = client(server, key["AccessKeyId"], key["SecretAccessKey"])
    assert sm.list_training_jobs()["TrainingJobSummaries"] == []
    # Past authentication, the operation's own answer.
    code, message, _ = error_of(lambda: sm.describe_training_job(TrainingJobName="nope"))
    assert (code, message) == ("ValidationException", "Requested resource not found.")
    logs = client(server, key["AccessKeyId"], key["SecretAccessKey"], "logs")
    assert logs.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs")["logStreams"] == []
    creds = Credentials(key["AccessKeyId"], key["SecretAccessKey"])
    for path in ("/v1/training-jobs", "/v1/subscriptions", "/v1/events?after=0&limit=5"):
        request = AWSRequest(method="GET", url=server.endpoint + path)
        SigV4Auth(creds, "murphy", "eu-west-1").add_auth(request)
        with urllib.request.urlopen(urllib.request.Request(request.url, headers=dict(request.headers))) as r:
            assert r.status == 200, path
    # A presigned URL (what a browser's EventSource can use) opens the stream.
    request = AWSRequest(method="GET", url=server.endpoint + "/v1/events/stream")
    SigV4QueryAuth(creds, "murphy", "eu-west-1", expires=60).add_auth(request)
    with urllib.request.urlopen(request.url, timeout=10) as r:
        assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream")
        assert r.readline().startswith(b": murphy event stream")


def test_the_account_comes_from_the_key(auth_server: tuple[MurphyServer, dict[str, str]]) -> None:
    server, key = auth_server
    sm = client(server, key["AccessKeyId"], key["SecretAccessKey"])
    arn = sm.create_training_job(
        TrainingJobName="acct", RoleArn="arn:aws:iam::111111111111:role/r",
        AlgorithmSpecification={"TrainingImage": "murphy/python:latest", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://b/out"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
        StoppingCondition={"MaxRuntimeInSeconds": 60})["TrainingJobArn"]
    assert arn == f"arn:aws:sagemaker:eu-west-1:{ACCOUNT_A}:training-job/acct"


def test_wrong_secret_unknown_key_tampered_body(auth_server: tuple[MurphyServer, dict[str, str]]) -> None:
    server, key = auth_server
    wrong = client(server, key["AccessKeyId"], "x" * 40)
    assert error_of(wrong.list_training_jobs) == ("InvalidSignatureException", BAD_SIGNATURE, 400)
    unknown = client(server, "AKIAAAAAAAAAAAAAAAAA", key["SecretAccessKey"])
    assert error_of(unknown.list_training_jobs) == (
        "UnrecognizedClientException", "The security token included in the request is invalid.", 400)

    sm = client(server, key["AccessKeyId"], key["SecretAccessKey"])

    def tamper(request: Any, **_: Any) -> None:  # after signing, before sending
        request.body = request.body.replace(b'"MaxResults": 5', b'"MaxResults": 6')

    sm.meta.events.register("before-send.sagemaker.ListTrainingJobs", tamper)
    assert error_of(lambda: sm.list_training_jobs(MaxResults=5)) == ("InvalidSignatureException", BAD_SIGNATURE, 400)


def test_missing_and_incomplete_authorization(auth_server: tuple[MurphyServer, dict[str, str]]) -> None:
    server, _ = auth_server
    unsigned = boto3.client("sagemaker", endpoint_url=server.endpoint, region_name="eu-west-1",
                            config=Config(signature_version=botocore.UNSIGNED, retries={"max_attempts": 1}))
    assert error_of(unsigned.list_training_jobs) == (
        "MissingAuthenticationTokenException", "Missing Authentication Token", 400)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("POST", "/", body=b"{}", headers={
        "X-Amz-Target": "SageMaker.ListTrainingJobs", "Content-Type": "application/x-amz-json-1.1",
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIAAAAAAAAAAAAAAAAA/20260101/us-east-1/sagemaker/aws4_request"})
    response = conn.getresponse()
    body = json.loads(response.read())
    assert response.status == 400 and body["__type"] == "IncompleteSignatureException"
    assert "requires 'Signature' parameter" in body["message"] and "requires 'SignedHeaders'" in body["message"]
    assert "'X-Amz-Date' or a 'Date' header" in body["message"]
    # The REST mirror and the event routes answer 403 with the same body; the probe stays open.
    for path in ("/v1/training-jobs", "/v1/subscriptions", "/v1/dead-letters", "/v1/events/stream", "/metrics"):
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(server.endpoint + path, timeout=10)
        assert info.value.code == 403, path
        assert json.loads(info.value.read())["__type"] == "MissingAuthenticationTokenException"
    with urllib.request.urlopen(server.endpoint + "/healthz", timeout=10) as r:
        assert r.status == 200


def _signed_at(monkeypatch: pytest.MonkeyPatch, offset_s: float) -> None:
    when = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) + dt.timedelta(seconds=offset_s)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: when)


def test_clock_skew_of_five_minutes(auth_server: tuple[MurphyServer, dict[str, str]],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    server, key = auth_server
    sm = client(server, key["AccessKeyId"], key["SecretAccessKey"])
    _signed_at(monkeypatch, -240)  # inside the window
    sm.list_training_jobs()
    _signed_at(monkeypatch, -360)
    code, message, _ = error_of(sm.list_training_jobs)
    assert code == "InvalidSignatureException" and message.startswith("Signature expired: ")
    assert message.endswith(" - 5 min.)")
    _signed_at(monkeypatch, 360)
    code, message, _ = error_of(sm.list_training_jobs)
    assert code == "InvalidSignatureException" and message.startswith("Signature not yet current: ")


def test_a_replayed_request_fails_after_the_skew_window(make_server: MakeServer, tmp_path: Path) -> None:
    data = tmp_path / "short"
    key = keys(data, "create", "--account", ACCOUNT_A)["AccessKey"]
    server = make_server("--auth", "sigv4", "--runtime", "fake", data_dir=data,
                         env={"MURPHY_AUTH_CLOCK_SKEW_S": "2"})
    captured: dict[str, Any] = {}

    def capture(request: Any, **_: Any) -> None:
        captured.update(url=request.url, headers=dict(request.headers.items()), body=request.body)

    sm = client(server, key["AccessKeyId"], key["SecretAccessKey"])
    sm.meta.events.register("before-send.sagemaker.ListTrainingJobs", capture)
    sm.list_training_jobs()

    def replay() -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(captured["url"], data=captured["body"], headers=captured["headers"], method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    assert replay()[0] == 200  # within the window a replay is accepted, as AWS accepts it
    time.sleep(3.5)
    status, body = replay()
    assert status == 400 and body["__type"] == "InvalidSignatureException"
    assert body["message"].startswith("Signature expired: ")


def test_disabled_and_deleted_keys_and_session_tokens(auth_server: tuple[MurphyServer, dict[str, str]]) -> None:
    server, key = auth_server
    sm = client(server, key["AccessKeyId"], key["SecretAccessKey"])
    sm.list_training_jobs()
    keys(server.data_dir, "disable", key["AccessKeyId"])
    assert error_of(sm.list_training_jobs)[0] == "UnrecognizedClientException"
    keys(server.data_dir, "enable", key["AccessKeyId"])
    sm.list_training_jobs()

    creds = keys(server.data_dir, "session", "--account", ACCOUNT_A, "--duration-seconds", "900")["Credentials"]
    assert creds["AccessKeyId"].startswith("ASIA") and creds["SessionToken"]
    temp = client(server, creds["AccessKeyId"], creds["SecretAccessKey"], token=creds["SessionToken"])
    assert temp.list_training_jobs()["TrainingJobSummaries"] == []
    for token in (None, creds["SessionToken"][:-1] + "x"):
        bad = client(server, creds["AccessKeyId"], creds["SecretAccessKey"], token=token)
        assert error_of(bad.list_training_jobs)[0] == "UnrecognizedClientException"
    # A long-term key with a token it was never given.
    stray = client(server, key["AccessKeyId"], key["SecretAccessKey"], token=creds["SessionToken"])
    assert error_of(stray.list_training_jobs)[0] == "UnrecognizedClientException"

    keys(server.data_dir, "delete", key["AccessKeyId"])
    assert error_of(sm.list_training_jobs)[0] == "UnrecognizedClientException"


def test_a_key_limited_to_some_actions(auth_server: tuple[MurphyServer, dict[str, str]]) -> None:
    server, _ = auth_server
    reader = keys(server.data_dir, "create", "--account", ACCOUNT_A, "--name", "reader",
                  "--actions", "sagemaker:List*,sagemaker:Describe*")["AccessKey"]
    sm = client(server, reader["AccessKeyId"], reader["SecretAccessKey"])
    sm.list_training_jobs()
    code, message, _ = error_of(lambda: sm.stop_training_job(TrainingJobName="x"))
    assert code == "AccessDeniedException"
    assert message.startswith(f"User: arn:aws:iam::{ACCOUNT_A}:user/reader is not authorized to perform: "
                              "sagemaker:StopTrainingJob")


def test_no_auth_off_loopback_refuses_to_start(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "murphy.cli", "server", "--host", "0.0.0.0", "--port", "0",
                             "--data-dir", str(tmp_path / "m")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "without authentication" in result.stderr and "--auth sigv4" in result.stderr
    assert "murphy keys create" in result.stderr


def test_accounts_cannot_see_each_other(auth_server: tuple[MurphyServer, dict[str, str]]) -> None:
    server, key_a = auth_server
    key_b = keys(server.data_dir, "create", "--account", "222222222222", "--name", "bob")["AccessKey"]
    a = client(server, key_a["AccessKeyId"], key_a["SecretAccessKey"])
    b = client(server, key_b["AccessKeyId"], key_b["SecretAccessKey"])
    arn = b.create_training_job(
        TrainingJobName="bobs", RoleArn="arn:aws:iam::222222222222:role/r", Tags=[{"Key": "k", "Value": "v"}],
        AlgorithmSpecification={"TrainingImage": "murphy/python:latest", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://b/out"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
        StoppingCondition={"MaxRuntimeInSeconds": 600})["TrainingJobArn"]
    deadline = time.monotonic() + 30
    logs_b = client(server, key_b["AccessKeyId"], key_b["SecretAccessKey"], "logs")
    group = "/aws/sagemaker/TrainingJobs"
    while not logs_b.describe_log_streams(logGroupName=group, logStreamNamePrefix="bobs")["logStreams"]:
        assert time.monotonic() < deadline, "bob's job never got a log stream"
        time.sleep(0.2)
    stream = logs_b.describe_log_streams(logGroupName=group, logStreamNamePrefix="bobs")["logStreams"][0]["logStreamName"]

    # For alice, bob's job is exactly a job that does not exist: same codes, same messages.
    missing = error_of(lambda: a.describe_training_job(TrainingJobName="no-such-job"))
    assert error_of(lambda: a.describe_training_job(TrainingJobName="bobs")) == missing
    assert error_of(lambda: a.stop_training_job(TrainingJobName="bobs")) == missing
    assert a.list_training_jobs()["TrainingJobSummaries"] == []
    assert [j["TrainingJobName"] for j in b.list_training_jobs()["TrainingJobSummaries"]] == ["bobs"]
    gone = error_of(lambda: a.list_tags(ResourceArn=arn.replace("bobs", "nobody")))
    assert error_of(lambda: a.list_tags(ResourceArn=arn)) == gone
    assert error_of(lambda: a.add_tags(ResourceArn=arn, Tags=[{"Key": "x", "Value": "y"}])) == gone
    assert error_of(lambda: a.delete_tags(ResourceArn=arn, TagKeys=["k"])) == gone
    logs_a = client(server, key_a["AccessKeyId"], key_a["SecretAccessKey"], "logs")
    assert logs_a.describe_log_streams(logGroupName=group, logStreamNamePrefix="bobs")["logStreams"] == []
    no_stream = error_of(lambda: logs_a.get_log_events(logGroupName=group, logStreamName="bobs/algo-1-1"))
    assert error_of(lambda: logs_a.get_log_events(logGroupName=group, logStreamName=stream)) == no_stream
    # The dashboard's routes keep accounts apart the same way.
    for path in ("/dashboard", "/tensors", "/nonfinite", "/logs"):
        assert rest(server, key_a, "GET", "/v1/training-jobs/bobs" + path) == \
            rest(server, key_a, "GET", "/v1/training-jobs/no-such-job" + path)
    assert rest(server, key_a, "GET", "/v1/ui/jobs") == (200, {"jobs": []})
    status, rows = rest(server, key_b, "GET", "/v1/ui/jobs")
    assert status == 200 and [r["name"] for r in rows["jobs"]] == ["bobs"]
    assert rest(server, key_b, "GET", "/v1/training-jobs/bobs/logs")[0] == 200
    # Bob still sees and stops his own job, with his tags intact.
    assert b.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "k", "Value": "v"}]
    b.stop_training_job(TrainingJobName="bobs")


def rest(server: MurphyServer, key: dict[str, str], method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    request = AWSRequest(method=method, url=server.endpoint + path, data=data,
                         headers={"Content-Type": "application/json"} if body is not None else {})
    SigV4Auth(Credentials(key["AccessKeyId"], key["SecretAccessKey"]), "murphy", "us-east-1").add_auth(request)
    req = urllib.request.Request(request.url, data=data or None, headers=dict(request.headers), method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_events_and_subscriptions_are_per_account(auth_server: tuple[MurphyServer, dict[str, str]]) -> None:
    server, key_a = auth_server
    key_b = keys(server.data_dir, "create", "--account", "222222222222", "--name", "bob")["AccessKey"]
    sub = {"name": "bobs-hook", "pattern": {"source": ["aws.sagemaker"]},
           "target": {"type": "webhook", "url": "http://127.0.0.1:9/hook"}}
    status, created = rest(server, key_b, "POST", "/v1/subscriptions", sub)
    assert status == 201 and created["account"] == "222222222222"
    b = client(server, key_b["AccessKeyId"], key_b["SecretAccessKey"])
    b.create_training_job(
        TrainingJobName="bobs-events", RoleArn="arn:aws:iam::222222222222:role/r",
        AlgorithmSpecification={"TrainingImage": "murphy/python:latest", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://b/out"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
        StoppingCondition={"MaxRuntimeInSeconds": 600})
    status, seen_b = rest(server, key_b, "GET", "/v1/events?after=0")
    assert status == 200 and seen_b["events"], "bob sees his job's events"
    assert {e["event"]["account"] for e in seen_b["events"]} == {"222222222222"}
    # Alice: no events of bob's, no subscription of bob's, and bob's subscription is unknown to her.
    assert rest(server, key_a, "GET", "/v1/events?after=0")[1]["events"] == []
    assert rest(server, key_a, "GET", "/v1/subscriptions")[1] == {"subscriptions": []}
    unknown = rest(server, key_a, "GET", "/v1/subscriptions/nobody")
    assert unknown[0] == 404
    for method, path in (("GET", "/v1/subscriptions/bobs-hook"), ("DELETE", "/v1/subscriptions/bobs-hook"),
                         ("GET", "/v1/subscriptions/bobs-hook/dead-letters")):
        status, body = rest(server, key_a, method, path)
        assert (status, body["__type"]) == (unknown[0], unknown[1]["__type"]), path
        assert body["message"] == unknown[1]["message"].replace("nobody", "bobs-hook")
    status, body = rest(server, key_a, "POST", "/v1/subscriptions/bobs-hook/redrive", {})
    assert status == 404
    assert rest(server, key_a, "GET", "/v1/dead-letters")[1] == {"dead_letters": []}
    assert [s["name"] for s in rest(server, key_b, "GET", "/v1/subscriptions")[1]["subscriptions"]] == ["bobs-hook"]


def _http(server: MurphyServer, method: str, path: str, body: str | None = None,
          headers: dict[str, str] | None = None) -> tuple[int, list[tuple[str, str]]]:
    from urllib.parse import urlsplit

    url = urlsplit(server.endpoint)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        response.read()
        return response.status, response.getheaders()
    finally:
        conn.close()


def test_a_dashboard_login_survives_a_server_restart(make_server: MakeServer, tmp_path: Path) -> None:
    """The session lives in the job store (SQLite here), not in the server process."""
    from urllib.parse import urlencode

    data = tmp_path / "murphy"
    key = keys(data, "create", "--account", ACCOUNT_A, "--name", "alice")["AccessKey"]
    args = ("--auth", "sigv4", "--runtime", "fake")
    server = make_server(*args, data_dir=data)
    form = urlencode({"access_key_id": key["AccessKeyId"], "secret": key["SecretAccessKey"], "next": "/ui/"})
    status, headers = _http(server, "POST", "/ui/login", form, {"content-type": "application/x-www-form-urlencoded"})
    assert status == 303
    cookies = dict(v.split(";")[0].split("=", 1) for k, v in headers if k.lower() == "set-cookie")
    jar = "; ".join(f"{k}={v}" for k, v in cookies.items())
    assert _http(server, "GET", "/ui/", headers={"cookie": jar})[0] == 200
    assert _http(server, "GET", "/ui/")[0] == 303  # no cookie: to the login form

    server.stop()
    restarted = make_server(*args, data_dir=data)
    assert _http(restarted, "GET", "/ui/", headers={"cookie": jar})[0] == 200
    assert _http(restarted, "GET", "/v1/ui/jobs", headers={"cookie": jar})[0] == 200
    assert _http(restarted, "POST", "/ui/logout",
                 headers={"cookie": jar, "x-murphy-csrf": cookies["murphy_csrf"]})[0] == 303
    assert _http(restarted, "GET", "/ui/", headers={"cookie": jar})[0] == 303  # logged out for good
