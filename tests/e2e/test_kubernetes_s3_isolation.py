"""Issue 18 §3 on the Kubernetes runtime, black-box: the stock boto3 client → a real ``murphy
server --runtime kubernetes`` → murphy's fake Kubernetes API server, whose kubelet runs the pods as
local processes → SeaweedFS behind murphy's S3 gateway.

A training pod's own code sees only the key murphy issued for it (``ASIA``, from its Secret, never
the service's), reads its input and writes its tensors, and gets S3's ``AccessDenied`` for another
job's tensors, a listing of the bucket and writes outside its output. A second job, with a rule,
runs at the same time: its tensors reach S3 through the gateway and its rule (its own key) reads
them and finds the NaN. Once both jobs are over every key they got is revoked, and no pod, Job or
Secret murphy made ever held the service's credentials.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_job_s3_isolation import PROBE, PROBE_EXPECTED
from test_kubernetes_runtime_e2e import EXPLODING, job_request, start, watch

from k8s_fake import TEST_IMAGES, fake_cluster
from murphy.runtimes.kubernetes_fake import FakeCluster
from sourcetar import train_py_tarball

PYTORCH = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeCluster]:
    images = {**TEST_IMAGES, "murphy/linear-regression-demo:*": ["python3", "-m", "murphy.container"]}
    with fake_cluster(tmp_path / "fake-k8s", run_as_user=False, images=images) as c:
        yield c


def job_keys(data_dir: Path) -> list[str]:
    """The names of the job keys in the server's job store (the containers they were issued for)."""
    from murphy.auth.keys import KeyRing
    from murphy.settings import Settings
    from murphy.store import open_job_store

    store = open_job_store(Settings(data_dir=data_dir).resolved_database_url)
    try:
        ring = KeyRing(store, Settings(data_dir=data_dir))  # type: ignore[arg-type]
        return [k["UserName"] for k in ring.list()["AccessKeyMetadata"] if k["AccessKeyId"].startswith("ASIA")]
    finally:
        store.close()


def test_a_training_pod_holds_only_its_own_key_and_a_rule_still_works(
        make_server: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, cluster: FakeCluster) -> None:
    from murphy.storage import open_store

    server = start(make_server, monkeypatch, request, cluster)
    client, bucket = server.client(), server.extra["bucket"]
    s3 = request.getfixturevalue("seaweedfs_server")
    store = open_store(f"s3://{bucket}")
    store.put("src/probe.tar.gz", train_py_tarball(PROBE))
    store.put("input/prober/train.csv", b"1,2,3")
    store.put("debug/victim/debug-output/index/0.json", b"{}")
    # Seen while the jobs run: every Secret and pod template murphy made (the fake's own store).
    made: dict[str, Any] = {}

    def snapshot() -> None:
        for kind in ("secrets", "jobs", "pods"):
            for o in cluster.store.iter_all(kind):
                made[f"{kind}/{o['metadata']['name']}"] = o

    body = job_request("prober", bucket, {
        "bucket": bucket, "service_secret_sha": hashlib.sha256(s3.secret_key.encode()).hexdigest(),
        "sagemaker_program": '"train.py"', "sagemaker_submit_directory": f'"s3://{bucket}/src/probe.tar.gz"'},
        rules=False)
    body["AlgorithmSpecification"]["TrainingImage"] = PYTORCH
    body["InputDataConfig"] = [{"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/input/prober"}}}]
    client.create_training_job(**body)
    client.create_training_job(**job_request("exploding", bucket, EXPLODING))
    deadline = time.monotonic() + 240
    while True:
        snapshot()
        states = [client.describe_training_job(TrainingJobName=n)["TrainingJobStatus"] for n in ("prober", "exploding")]
        if all(s in ("Completed", "Failed", "Stopped") for s in states):
            break
        assert time.monotonic() < deadline, (states, server.log()[-3000:])
        time.sleep(0.3)

    prober = watch(client, "prober")
    assert prober["TrainingJobStatus"] == "Completed", (prober.get("FailureReason"), server.log()[-3000:])
    with tarfile.open(fileobj=io.BytesIO(open_store(f"s3://{bucket}/output/prober/output").get("model.tar.gz"))) as tar:
        member = tar.extractfile("probe.json")
        assert member is not None
        probe = json.loads(member.read())
    assert probe == PROBE_EXPECTED  # the ASIA key is the one this job's training pods share
    assert not open_store(f"s3://{bucket}/output/victim/output").exists("model.tar.gz")
    assert store.get("input/prober/train.csv") == b"1,2,3"

    # The other job's tensors went through the gateway, and its rule, with its own key, read them.
    exploding = watch(client, "exploding")
    assert exploding["TrainingJobStatus"] == "Stopped", server.log()[-3000:]
    rule = exploding["DebugRuleEvaluationStatuses"][0]
    assert rule["RuleEvaluationStatus"] == "IssuesFound", rule

    # Every Secret held an ASIA key of its own; nothing murphy made held the service's identity.
    secrets = {k: o for k, o in made.items() if k.startswith("secrets/") and
               (o["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "murphy"}
    assert len(secrets) == 3, sorted(secrets)  # prober's training, exploding's training and its rule
    ids = set()
    for o in secrets.values():
        data = {k: base64.b64decode(v).decode() for k, v in (o.get("data") or {}).items()}
        assert data["AWS_ACCESS_KEY_ID"].startswith("ASIA"), data.keys()
        assert s3.secret_key not in data.values() and s3.access_key not in data.values()
        ids.add(data["AWS_ACCESS_KEY_ID"])
    assert len(ids) == 3
    text = json.dumps(made)
    assert s3.secret_key not in text and s3.access_key not in text
    for key, o in made.items():
        if key.startswith("jobs/"):
            for c in o["spec"]["template"]["spec"]["containers"]:
                env = {e["name"]: e.get("value") for e in c.get("env") or []}
                assert env["AWS_ENDPOINT_URL_S3"] != s3.endpoint_url and "AWS_ACCESS_KEY_ID" not in env

    # Both jobs are over: every key they got was revoked.
    deadline = time.monotonic() + 30
    while job_keys(server.data_dir):
        assert time.monotonic() < deadline, job_keys(server.data_dir)
        time.sleep(0.3)
