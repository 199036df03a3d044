"""Issue 18 §3/§5, black-box: a training job's code, run by a real ``murphy server`` on the process
and Docker runtimes with SeaweedFS behind it, holds only its own S3 credentials. It can read its
input and write its output, and S3 answers ``AccessDenied`` when it tries another job's tensors,
a write outside its own prefixes, or a listing of the bucket."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from typing import Any

import pytest
from test_control_plane import job_request, put_object, start_plane, watch

from sourcetar import train_py_tarball

PROBE = r'''
import hashlib, json, os, sys
import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

bucket, me = sys.argv[sys.argv.index("--bucket") + 1], os.environ["TRAINING_JOB_NAME"]
service_sha = sys.argv[sys.argv.index("--service_secret_sha") + 1]
s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))

def code(call):
    try:
        call()
        return "allowed"
    except ClientError as e:
        return e.response["Error"]["Code"]

result = {
    "key_kind": os.environ.get("AWS_ACCESS_KEY_ID", "")[:4],
    "service_secret_seen": any(hashlib.sha256(v.encode()).hexdigest() == service_sha for v in os.environ.values()),
    "own_input": s3.get_object(Bucket=bucket, Key="input/" + me + "/train.csv")["Body"].read().decode(),
    "other_tensors": code(lambda: s3.get_object(Bucket=bucket, Key="debug/victim/debug-output/index/0.json")),
    "list_other": code(lambda: s3.list_objects_v2(Bucket=bucket, Prefix="debug/victim/")),
    "list_bucket": code(lambda: s3.list_objects_v2(Bucket=bucket)),
    "write_other_output": code(lambda: s3.put_object(Bucket=bucket, Key="output/victim/output/model.tar.gz", Body=b"x")),
    "write_input": code(lambda: s3.put_object(Bucket=bucket, Key="input/" + me + "/train.csv", Body=b"x")),
    "write_own_tensors": code(lambda: s3.put_object(Bucket=bucket, Key="debug/" + me + "/debug-output/probe", Body=b"ok")),
}
print("PROBE " + json.dumps(result), flush=True)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "probe.json"), "w") as f:
    json.dump(result, f)
'''




RUNTIMES = [pytest.param("process"), pytest.param("docker", marks=pytest.mark.docker)]


@pytest.mark.slow
@pytest.mark.parametrize("runtime_name", RUNTIMES)
def test_a_training_container_gets_access_denied_outside_its_own_locations(
        request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch, runtime_name: str) -> None:
    if runtime_name == "docker":
        request.getfixturevalue("docker_engine")
    server = start_plane(request, make_server, monkeypatch, runtime_name, "s3")
    bucket = server.extra["bucket"]
    put_object(server, "src/probe.tar.gz", train_py_tarball(PROBE))
    put_object(server, "input/prober/train.csv", b"1,2,3")
    put_object(server, "debug/victim/debug-output/index/0.json", b"{}")
    secret = request.getfixturevalue("seaweedfs_server").secret_key
    body = job_request("prober", bucket, {
        "bucket": bucket, "service_secret_sha": hashlib.sha256(secret.encode()).hexdigest(), "sagemaker_program": '"train.py"',
        "sagemaker_submit_directory": f'"s3://{bucket}/src/probe.tar.gz"'})
    body["AlgorithmSpecification"]["TrainingImage"] = \
        "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
    body["InputDataConfig"] = [{"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/input/prober"}}}]
    body.pop("DebugRuleConfigurations")
    client = server.client()
    client.create_training_job(**body)
    job, _ = watch(client, "prober", timeout=180)
    assert job["TrainingJobStatus"] == "Completed", (job.get("FailureReason"), server.log()[-3000:])

    from murphy.storage import open_store

    out = open_store(f"s3://{bucket}/output/prober/output")
    with tarfile.open(fileobj=io.BytesIO(out.get("model.tar.gz"))) as tar:
        member = tar.extractfile("probe.json")
        assert member is not None
        probe = json.loads(member.read())
    assert probe == {
        "key_kind": "ASIA",  # murphy's temporary key for this container, not the service's
        "service_secret_seen": False,
        "own_input": "1,2,3",
        "other_tensors": "AccessDenied",
        "list_other": "AccessDenied",
        "list_bucket": "AccessDenied",
        "write_other_output": "AccessDenied",
        "write_input": "AccessDenied",
        "write_own_tensors": "allowed",
    }
    assert not open_store(f"s3://{bucket}/output/victim/output").exists("model.tar.gz")
    # The job ended: its container's key was revoked (the job store holds no key of it).
    from murphy.auth.keys import KeyRing
    from murphy.settings import Settings
    from murphy.store import open_job_store

    store = open_job_store(Settings(data_dir=server.data_dir).resolved_database_url)
    ring = KeyRing(store, Settings(data_dir=server.data_dir))  # type: ignore[arg-type]
    try:
        deadline = time.monotonic() + 15  # released right after the job's terminal write
        while "prober-training" in [k["UserName"] for k in ring.list()["AccessKeyMetadata"]]:
            assert time.monotonic() < deadline, ring.list()
            time.sleep(0.2)
    finally:
        store.close()
