"""``S3DataDistributionType=ShardedByS3Key`` (issue 17 §1), black-box: the stock boto3 client
against a real ``murphy server`` with SeaweedFS behind it, a 2-host job on the process and Docker
runtimes. Each host's script reports the files it sees in its channels (its log stream, and
``algo-1``'s model.tar.gz): the sharded prefix and the sharded manifest are split into disjoint
shares that together cover the channel, sorted keys round-robin over ``algo-1``, ``algo-2``; a
sharded URI naming one object is ``algo-1``'s alone; the fully replicated channel is whole on both."""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

import pytest
from test_control_plane import job_request, put_object, runtime, start_plane, watch  # noqa: F401 (fixture)
from test_multi_instance import host_logs

from sourcetar import train_py_tarball

SCRIPT = r'''
import json, os

def seen(channel):
    root = os.environ["SM_CHANNEL_" + channel.upper()]
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
            with open(os.path.join(d, f)) as fh:
                out[rel] = fh.read()
    return dict(sorted(out.items()))

with open(os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "resourceconfig.json")) as f:
    host = json.load(f)["current_host"]
report = {"host": host, "env_host": os.environ["SM_CURRENT_HOST"], **{c: seen(c) for c in json.loads(os.environ["SM_CHANNELS"])}}
print("SEEN " + json.dumps(report), flush=True)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "seen-%s.json" % host), "w") as f:
    json.dump(report, f)
'''

TRAIN = ["a.csv", "b.csv", "c.csv", "sub/d.csv", "sub/deeper/e.csv"]  # sorted: S3's listing order
LISTED = ["l3.csv", "l1.csv", "l2.csv"]  # manifest order is not the assignment order
FULL = ["all-1.txt", "dir/all-2.txt"]


def channel(name: str, uri: str, distribution: str, data_type: str = "S3Prefix") -> dict[str, Any]:
    return {"ChannelName": name, "DataSource": {"S3DataSource": {
        "S3DataType": data_type, "S3Uri": uri, "S3DataDistributionType": distribution}}}


def reports(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("SEEN "):]) for line in text.splitlines() if line.startswith("SEEN ")]


@pytest.mark.slow
def test_two_hosts_get_disjoint_shards_and_the_replicated_channel_whole(
        request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:  # noqa: F811
    server = start_plane(request, make_server, monkeypatch, runtime, "s3")
    bucket, name = server.extra["bucket"], "sharded"
    put_object(server, "src/seen.tar.gz", train_py_tarball(SCRIPT))
    for key in TRAIN:
        put_object(server, f"input/{name}/train/{key}", f"train:{key}".encode())
    for key in LISTED:
        put_object(server, f"input/{name}/pool/{key}", f"listed:{key}".encode())
    put_object(server, f"input/{name}/pool/not-listed.csv", b"never downloaded")
    manifest = [{"prefix": f"s3://{bucket}/input/{name}/pool/"}, *LISTED]
    put_object(server, f"input/{name}/listed.manifest", json.dumps(manifest).encode())
    for key in FULL:
        put_object(server, f"input/{name}/full/{key}", f"full:{key}".encode())
    put_object(server, f"input/{name}/one/only.csv", b"single:only.csv")

    body = job_request(name, bucket, {"sagemaker_program": '"train.py"',
                                      "sagemaker_submit_directory": f'"s3://{bucket}/src/seen.tar.gz"'})
    body["AlgorithmSpecification"]["TrainingImage"] = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
    body["ResourceConfig"]["InstanceCount"] = 2
    body["InputDataConfig"] = [
        channel("train", f"s3://{bucket}/input/{name}/train", "ShardedByS3Key"),
        channel("listed", f"s3://{bucket}/input/{name}/listed.manifest", "ShardedByS3Key", "ManifestFile"),
        channel("full", f"s3://{bucket}/input/{name}/full", "FullyReplicated"),
        channel("single", f"s3://{bucket}/input/{name}/one/only.csv", "ShardedByS3Key"),
    ]
    body.pop("DebugRuleConfigurations")
    body.pop("DebugHookConfig")
    client = server.client()
    client.create_training_job(**body)
    job, _ = watch(client, name, timeout=240)
    assert job["TrainingJobStatus"] == "Completed", (job.get("FailureReason"), server.log()[-4000:])
    assert [c["DataSource"]["S3DataSource"]["S3DataDistributionType"] for c in job["InputDataConfig"]] == [
        "ShardedByS3Key", "ShardedByS3Key", "FullyReplicated", "ShardedByS3Key"]

    by_host: dict[str, dict[str, Any]] = {}
    logs = host_logs(server, name)
    for stream, text in logs.items():
        (report,) = reports(text)
        host = stream.split("/")[1].rsplit("-", 1)[0]
        assert report["host"] == report["env_host"] == host
        by_host[host] = report
    assert sorted(by_host) == ["algo-1", "algo-2"], list(logs)
    one, two = by_host["algo-1"], by_host["algo-2"]

    # Sharded prefix: disjoint, together the whole channel, contents and nested paths intact.
    assert list(one["train"]) == ["a.csv", "c.csv", "sub/deeper/e.csv"]
    assert list(two["train"]) == ["b.csv", "sub/d.csv"]
    assert {**one["train"], **two["train"]} == {k: f"train:{k}" for k in TRAIN}
    # Sharded manifest: its entries (sorted), never the prefix's other objects.
    assert (list(one["listed"]), list(two["listed"])) == (["l1.csv", "l3.csv"], ["l2.csv"])
    assert {**one["listed"], **two["listed"]} == {k: f"listed:{k}" for k in LISTED}
    # A URI naming one object: one key, algo-1's; algo-2 has an empty channel and still runs.
    assert (one["single"], two["single"]) == ({"only.csv": "single:only.csv"}, {})
    # Fully replicated: whole on both hosts.
    assert one["full"] == two["full"] == {k: f"full:{k}" for k in FULL}
    # The toolkit says what each host got.
    algo2_log = next(t for s, t in logs.items() if "/algo-2-" in s)
    assert "channel train: 2 object(s) (ShardedByS3Key: algo-2's share, 1 in 2)" in algo2_log

    # algo-1 uploads the model: its report there is the one it logged.
    from murphy.storage import open_store

    blob = open_store(f"s3://{bucket}/output/{name}/output").get("model.tar.gz")
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        member = tar.extractfile("seen-algo-1.json")
        assert member is not None
        assert json.loads(member.read()) == one
