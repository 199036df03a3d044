"""Issue 18 §3/§5, black-box: a training job's code, run by a real ``murphy server`` on the process
and Docker runtimes with SeaweedFS behind it, holds only its own S3 credentials. It can read its
input and write its output, and S3 answers ``AccessDenied`` when it tries another job's tensors,
a write outside its own prefixes, or a listing of the bucket. With local buckets on Docker, a
container sees only its own prefixes (bind-mounted: inputs read-only, outputs read-write)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from typing import Any

import pytest
from test_control_plane import EXPLODING, job_request, put_object, start_plane, watch

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


# What PROBE reports in a job's container on every runtime: murphy's temporary key for this
# container (not the service's), its own input, AccessDenied everywhere else.
PROBE_EXPECTED = {
    "key_kind": "ASIA",
    "service_secret_seen": False,
    "own_input": "1,2,3",
    "other_tensors": "AccessDenied",
    "list_other": "AccessDenied",
    "list_bucket": "AccessDenied",
    "write_other_output": "AccessDenied",
    "write_input": "AccessDenied",
    "write_own_tensors": "allowed",
}

LOCAL_PROBE = r'''
import json, os, sys

bucket, me = sys.argv[sys.argv.index("--bucket") + 1], os.environ["TRAINING_JOB_NAME"]
root = os.environ["MURPHY_S3_LOCAL_ROOT"]
b = os.path.join(root, bucket)

def write(path, data=b"x"):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return "allowed"
    except OSError:
        return "denied"

def store_put(uri):
    from murphy.exceptions import StorageError
    from murphy.storage import open_store
    try:
        open_store(uri).put("model.tar.gz", b"x")
        return "allowed"
    except (StorageError, OSError) as e:  # a refused write; anything else is a bug to report
        return "denied" if isinstance(e, OSError) or isinstance(e.__cause__, OSError) else f"error: {e}"

result = {
    "own_input": open(os.path.join(b, "input", me, "train.csv")).read(),
    "channel": open("/opt/ml/input/data/train/train.csv").read(),
    "other_tensors_seen": os.path.exists(os.path.join(b, "debug", "victim")),
    "debug_dir": sorted(os.listdir(os.path.join(b, "debug"))),
    "output_dir": sorted(os.listdir(os.path.join(b, "output"))),
    "write_other_output": write(os.path.join(b, "output", "victim", "output", "model.tar.gz")),
    "store_write_other_output": store_put("s3://" + bucket + "/output/victim/output"),
    "write_input": write(os.path.join(b, "input", me, "train.csv")),
    "write_bucket_root": write(os.path.join(b, "planted")),
    "write_other_tensors": write(os.path.join(b, "debug", "victim", "debug-output", "index", "planted.json")),
    "write_own_tensors": write(os.path.join(b, "debug", me, "debug-output", "probe"), b"ok"),
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
    assert probe == PROBE_EXPECTED
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


@pytest.mark.slow
@pytest.mark.docker
def test_with_local_buckets_a_docker_container_sees_only_its_own_prefixes(
        request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    request.getfixturevalue("docker_engine")
    server = start_plane(request, make_server, monkeypatch, "docker", "local")
    bucket, client = server.extra["bucket"], server.client()
    buckets = server.data_dir / "buckets" / bucket
    # The victim: the seed's job, its tensors saved through its own mount and a rule's verdict.
    client.create_training_job(**job_request("victim", bucket, EXPLODING))
    job, seen = watch(client, "victim", timeout=180)
    assert seen[-1] == "IssuesFound" and job["TrainingJobStatus"] == "Stopped", (job, server.log()[-3000:])
    tensors = buckets / "debug" / "victim" / "debug-output"
    assert list((tensors / "index").rglob("*.json"))
    before = sorted(str(p.relative_to(tensors)) for p in tensors.rglob("*"))
    victim_model = buckets / "output" / "victim" / "output" / "model.tar.gz"
    victim_bytes = victim_model.read_bytes() if victim_model.exists() else None

    put_object(server, "src/probe.tar.gz", train_py_tarball(LOCAL_PROBE))
    put_object(server, "input/prober/train.csv", b"1,2,3")
    body = job_request("prober", bucket, {
        "bucket": bucket, "sagemaker_program": '"train.py"',
        "sagemaker_submit_directory": f'"s3://{bucket}/src/probe.tar.gz"'})
    body["AlgorithmSpecification"]["TrainingImage"] = \
        "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
    body["InputDataConfig"] = [{"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/input/prober"}}}]
    body.pop("DebugRuleConfigurations")
    client.create_training_job(**body)
    job, _ = watch(client, "prober", timeout=180)
    assert job["TrainingJobStatus"] == "Completed", (job.get("FailureReason"), server.log()[-3000:])
    with tarfile.open(buckets / "output" / "prober" / "output" / "model.tar.gz") as tar:
        member = tar.extractfile("probe.json")
        assert member is not None
        probe = json.loads(member.read())
    assert probe == {
        "own_input": "1,2,3",
        "channel": "1,2,3",
        "other_tensors_seen": False,  # another job's prefixes are not in the container at all
        "debug_dir": ["prober"],
        "output_dir": ["prober"],
        "write_other_output": "denied",
        "store_write_other_output": "denied",
        "write_input": "denied",  # an input channel is mounted read-only
        "write_bucket_root": "denied",
        "write_other_tensors": "denied",
        "write_own_tensors": "allowed",
    }
    assert (buckets / "debug" / "prober" / "debug-output" / "probe").read_bytes() == b"ok"
    assert (buckets / "input" / "prober" / "train.csv").read_bytes() == b"1,2,3"
    assert not (buckets / "planted").exists()
    assert (victim_model.read_bytes() if victim_model.exists() else None) == victim_bytes != b"x"
    assert sorted(str(p.relative_to(tensors)) for p in tensors.rglob("*")) == before
