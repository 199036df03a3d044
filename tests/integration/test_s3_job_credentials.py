"""murphy.auth.s3gateway for real: per-container credentials, verified and scoped, in front of
moto's server and SeaweedFS (issue 18 §3). The client is the stock boto3 and murphy's own store."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from murphy.auth.keys import KeyRing
from murphy.auth.s3gateway import S3Gateway
from murphy.runtimes.base import Channel, RulePlan, TrainingPlan, scoped_environment
from murphy.settings import Settings
from murphy.storage import gateway
from murphy.storage.s3 import S3ObjectStore
from murphy.store import open_job_store
from servers import S3Server


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    name = f"jc-{uuid.uuid4().hex[:8]}"
    s3_server.client().create_bucket(Bucket=name)
    return name


@pytest.fixture
def gw(tmp_path: Path, s3_server: S3Server) -> Iterator[S3Gateway]:
    store = open_job_store(f"sqlite:///{tmp_path}/murphy.db")
    service = (s3_server.access_key, s3_server.secret_key, None)
    g = S3Gateway(KeyRing(store, Settings(data_dir=tmp_path)), s3_server.endpoint_url,  # type: ignore[arg-type]
                  credentials=lambda: service)
    yield g
    g.close()
    store.close()


def _training(bucket: str, job: str) -> TrainingPlan:
    return TrainingPlan(
        container_name=f"{job}-training", job_name=job, image="murphy/python", hyperparameters={}, environment={},
        instance_type="ml.m5.large", instance_count=1, account="111122223333",
        channels=(Channel("train", f"s3://{bucket}/data/{job}/train"),),
        tensor_uri=f"s3://{bucket}/out/{job}/debug-output", output_uri=f"s3://{bucket}/out/{job}/output",
        checkpoint_uri=f"s3://{bucket}/ckpt/{job}")


def _client(env: dict[str, str], endpoint: str, region: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, region_name=region, aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], aws_session_token=env["AWS_SESSION_TOKEN"],
                        # s3v4: presigned URLs too (botocore presigns SigV2 on some endpoints otherwise)
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))


def _code(call: Any) -> tuple[int, str]:
    with pytest.raises(ClientError) as e:
        call()
    return e.value.response["ResponseMetadata"]["HTTPStatusCode"], e.value.response["Error"]["Code"]


def test_a_job_reads_and_writes_its_own_locations_and_nothing_else(gw: S3Gateway, s3_server: S3Server, bucket: str) -> None:
    admin = s3_server.client()
    admin.put_object(Bucket=bucket, Key="data/a/train/x.csv", Body=b"1,2")
    admin.put_object(Bucket=bucket, Key="out/b/debug-output/index/000000000/000000000000_worker_0.json", Body=b"{}")
    endpoint = gw.listen_tcp()
    creds = gw.issue(_training(bucket, "a"), endpoint)
    assert creds.env["AWS_ENDPOINT_URL_S3"] == endpoint and creds.access_key_id.startswith("ASIA")
    c = _client(creds.env, endpoint, s3_server.region)
    # its own: input read, listing, output / tensors / checkpoints written, multipart too
    assert c.get_object(Bucket=bucket, Key="data/a/train/x.csv")["Body"].read() == b"1,2"
    listed = c.list_objects_v2(Bucket=bucket, Prefix="data/a/train/")
    assert [o["Key"] for o in listed["Contents"]] == ["data/a/train/x.csv"]
    big = os.urandom(9 << 20)  # spooled to disk by the gateway
    c.put_object(Bucket=bucket, Key="out/a/output/model.tar.gz", Body=big)
    assert admin.get_object(Bucket=bucket, Key="out/a/output/model.tar.gz")["Body"].read() == big
    c.put_object(Bucket=bucket, Key="out/a/debug-output/events/0.tfevents", Body=b"t")
    c.put_object(Bucket=bucket, Key="ckpt/a/step-1", Body=b"c")
    assert c.head_object(Bucket=bucket, Key="ckpt/a/step-1")["ContentLength"] == 1
    c.delete_object(Bucket=bucket, Key="ckpt/a/step-1")
    # murphy's own store through the gateway (boto3 and its fast path)
    store = S3ObjectStore(bucket, "out/a/debug-output", client=c)
    assert store.get("events/0.tfevents") == b"t"
    # another job's tensors, the bucket, other prefixes: S3's AccessDenied
    other = "out/b/debug-output/index/000000000/000000000000_worker_0.json"
    assert _code(lambda: c.get_object(Bucket=bucket, Key=other)) == (403, "AccessDenied")
    assert _code(lambda: c.list_objects_v2(Bucket=bucket, Prefix="out/b/")) == (403, "AccessDenied")
    assert _code(lambda: c.list_objects_v2(Bucket=bucket)) == (403, "AccessDenied")
    assert _code(lambda: c.put_object(Bucket=bucket, Key="out/b/debug-output/x", Body=b"forged")) == (403, "AccessDenied")
    assert _code(lambda: c.put_object(Bucket=bucket, Key="data/a/train/x.csv", Body=b"overwrite")) == (403, "AccessDenied")
    assert _code(lambda: c.put_object(Bucket=bucket, Key="out/a-other/output/m", Body=b"x")) == (403, "AccessDenied")
    assert _code(lambda: c.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "out/a/output/ok"}, {"Key": other}]})) \
        == (403, "AccessDenied")
    assert _code(lambda: c.copy_object(Bucket=bucket, Key="out/a/output/stolen",
                                       CopySource={"Bucket": bucket, "Key": other})) == (403, "AccessDenied")
    assert _code(lambda: c.create_bucket(Bucket=f"{bucket}-new")) == (403, "AccessDenied")
    assert _code(lambda: c.list_buckets()) == (403, "AccessDenied")
    assert admin.get_object(Bucket=bucket, Key="data/a/train/x.csv")["Body"].read() == b"1,2"  # nothing written


def test_the_error_body_is_s3s_access_denied(gw: S3Gateway, s3_server: S3Server, bucket: str) -> None:
    import urllib.request

    endpoint = gw.listen_tcp()
    creds = gw.issue(_training(bucket, "a"), endpoint)
    c = _client(creds.env, endpoint, s3_server.region)
    url = c.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "out/b/secret"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=10)
    body = e.value.read().decode()
    assert e.value.code == 403 and e.value.headers["Content-Type"] == "application/xml"
    assert body.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
                           "<Message>Access Denied</Message>")
    assert "<RequestId>" in body and "<HostId>" in body


def test_a_sigv4_presigned_url_works_within_the_job_s_grants(gw: S3Gateway, s3_server: S3Server, bucket: str) -> None:
    import urllib.request

    endpoint = gw.listen_tcp()
    creds = gw.issue(_training(bucket, "a"), endpoint)
    c = _client(creds.env, endpoint, s3_server.region)
    s3_server.client().put_object(Bucket=bucket, Key="data/a/train/x.csv", Body=b"1,2")  # its input
    own = c.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "data/a/train/x.csv"})
    # Verified (UNSIGNED-PAYLOAD, as S3 signs presigned URLs), then forwarded with the service's
    # header signature only: S3 would refuse a request carrying the query signature too.
    with urllib.request.urlopen(own, timeout=10) as r:
        assert r.status == 200 and r.read() == b"1,2"
    other = c.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "out/b/secret"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(other, timeout=10)
    assert e.value.code == 403 and b"<Code>AccessDenied</Code>" in e.value.read()


def test_signatures_are_verified_and_revoked_keys_stop_working(gw: S3Gateway, s3_server: S3Server, bucket: str) -> None:
    endpoint = gw.listen_tcp()
    creds = gw.issue(_training(bucket, "a"), endpoint)
    good = _client(creds.env, endpoint, s3_server.region)
    good.put_object(Bucket=bucket, Key="out/a/output/ok", Body=b"1")
    wrong = _client({**creds.env, "AWS_SECRET_ACCESS_KEY": "x" * 40}, endpoint, s3_server.region)
    assert _code(lambda: wrong.put_object(Bucket=bucket, Key="out/a/output/ok", Body=b"2")) == (403, "SignatureDoesNotMatch")
    no_token = _client({**creds.env, "AWS_SESSION_TOKEN": "forged"}, endpoint, s3_server.region)
    assert _code(lambda: no_token.get_object(Bucket=bucket, Key="out/a/output/ok")) == (400, "InvalidToken")
    # The service's own key is not accepted by the gateway: containers never hold it, and
    # whoever does cannot use the gateway as a signing oracle either.
    service = {"AWS_ACCESS_KEY_ID": s3_server.access_key, "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
               "AWS_SESSION_TOKEN": ""}
    svc = boto3.client("s3", endpoint_url=endpoint, region_name=s3_server.region,
                       aws_access_key_id=service["AWS_ACCESS_KEY_ID"], aws_secret_access_key=service["AWS_SECRET_ACCESS_KEY"],
                       config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
    assert _code(lambda: svc.get_object(Bucket=bucket, Key="out/a/output/ok")) == (403, "InvalidAccessKeyId")
    gw.revoke(creds.access_key_id)
    assert _code(lambda: good.get_object(Bucket=bucket, Key="out/a/output/ok")) == (403, "InvalidAccessKeyId")
    gw.revoke(creds.access_key_id)  # idempotent


def test_a_rule_reads_its_jobs_tensors_and_writes_only_its_results(gw: S3Gateway, s3_server: S3Server, bucket: str) -> None:
    admin = s3_server.client()
    admin.put_object(Bucket=bucket, Key="out/a/debug-output/index/0.json", Body=b"{}")
    admin.put_object(Bucket=bucket, Key="out/b/debug-output/index/0.json", Body=b"{}")
    plan = RulePlan(container_name="a-rule-0", job_name="a", rule_name="Loss", image="murphy/rules", rule_parameters={},
                    base_trial_uri=f"s3://{bucket}/out/a/debug-output",
                    result_uri=f"s3://{bucket}/out/a/rule-output/Loss", account="111122223333")
    endpoint = gw.listen_tcp()
    c = _client(gw.issue(plan, endpoint).env, endpoint, s3_server.region)
    assert c.get_object(Bucket=bucket, Key="out/a/debug-output/index/0.json")["Body"].read() == b"{}"
    c.put_object(Bucket=bucket, Key="out/a/rule-output/Loss/result.json", Body=b"{}")
    assert _code(lambda: c.put_object(Bucket=bucket, Key="out/a/debug-output/index/1.json", Body=b"x")) \
        == (403, "AccessDenied")
    assert _code(lambda: c.put_object(Bucket=bucket, Key="out/a/rule-output/Other/result.json", Body=b"x")) \
        == (403, "AccessDenied")
    assert _code(lambda: c.get_object(Bucket=bucket, Key="out/b/debug-output/index/0.json")) == (403, "AccessDenied")


def test_through_the_docker_path_unix_socket_and_container_loopback(gw: S3Gateway, s3_server: S3Server,
                                                                     bucket: str, tmp_path: Path) -> None:
    sock = str(tmp_path / "s3.sock")
    gw.listen_unix(sock)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    inner = gateway.serve_loopback(port, sock)  # what the toolkit starts inside a container
    try:
        endpoint = f"http://127.0.0.1:{port}"
        c = _client(gw.issue(_training(bucket, "a"), endpoint).env, endpoint, s3_server.region)
        c.put_object(Bucket=bucket, Key="out/a/output/m", Body=b"m")
        assert c.get_object(Bucket=bucket, Key="out/a/output/m")["Body"].read() == b"m"
        assert _code(lambda: c.get_object(Bucket=bucket, Key="out/b/output/m")) == (403, "AccessDenied")
    finally:
        inner.close()


def test_a_container_environment_never_holds_the_service_credentials(gw: S3Gateway, bucket: str) -> None:
    creds = gw.issue(_training(bucket, "a"), "http://127.0.0.1:1")
    service_env = {"AWS_ACCESS_KEY_ID": "SERVICEKEY", "AWS_SECRET_ACCESS_KEY": "servicesecret", "AWS_PROFILE": "p",
                   "MURPHY_S3_ENDPOINT_URL": "http://s3.real:8333", "AWS_REGION": "us-east-1", "PATH": "/bin"}
    env = scoped_environment(service_env, creds)
    assert env["AWS_ACCESS_KEY_ID"] == creds.access_key_id and "servicesecret" not in env.values()
    assert "AWS_PROFILE" not in env and env["MURPHY_S3_ENDPOINT_URL"] == "http://127.0.0.1:1"
    assert env["AWS_REGION"] == "us-east-1" and env["PATH"] == "/bin"


def test_a_container_key_calls_nothing_of_murphys_api(gw: S3Gateway, bucket: str) -> None:
    from murphy.auth.verifier import Principal

    creds = gw.issue(_training(bucket, "a"), "http://127.0.0.1:1")
    key = gw.keys.resolve(creds.access_key_id)
    assert key is not None and key.session_token_sha256 is not None and key.expires_at is not None
    principal = Principal(key.access_key_id, key.account, key.name, "us-east-1", key.actions)
    for action in ("sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "logs:GetLogEvents",
                   "murphy:Read", "murphy:Write"):
        assert not principal.may(action), action
