"""Pipe input mode, black-box: the stock boto3 client against a real ``murphy server`` with
SeaweedFS behind it, a 2-host job on the process and Docker runtimes. The script is written as
for SageMaker: it opens ``/opt/ml/input/data/train_0`` then ``train_1`` (plain ``open()``, the FIFO
of each epoch) and reports what it read; beside them a sharded Pipe channel (each host streams
its share) and a File channel (downloaded as before); ``inputdataconfig.json`` says each
channel's mode. A second job whose Pipe object vanishes after the job started fails with the
feeder's reason; a third, stopped while its script blocks on the next epoch's FIFO, leaves nothing
running.

FIFOs are per container, so a dead job's pipes cannot outlive it: the feeders are threads of the
toolkit, and the checks below ask the OS (or the Docker engine) whether anything of the job runs."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import pytest
from test_control_plane import job_request, put_object, runtime, start_plane, watch  # noqa: F401 (fixture)
from test_multi_instance import host_logs, still_running

from sourcetar import train_py_tarball

SCRIPT = r'''
import hashlib, json, os

DATA = "/opt/ml/input/data"

def epoch(channel, n):
    with open(os.path.join(DATA, "%s_%d" % (channel, n)), "rb") as f:  # the FIFO: blocks until fed
        data = f.read()
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "head": data[:12].decode("latin-1")}

def files(channel):
    root = os.path.join(DATA, channel)
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            with open(os.path.join(d, n)) as fh:
                out[os.path.relpath(os.path.join(d, n), root)] = fh.read()
    return out

with open("/opt/ml/input/config/inputdataconfig.json") as f:
    config = json.load(f)
with open("/opt/ml/input/config/resourceconfig.json") as f:
    host = json.load(f)["current_host"]
report = {"host": host, "config": config,
          "train": [epoch("train", n) for n in (0, 1)], "shard": [epoch("shard", n) for n in (0, 1)],
          "files": files("files"), "train_dir": os.path.isdir(os.path.join(DATA, "train"))}
print("PIPE " + json.dumps(report), flush=True)
'''

TRAIN = {"part-0": b"alpha-" * 10, "part-1": bytes(range(256)) * 12_000, "sub/part-2": b"omega"}  # ~3 MiB
SHARD = {k: f"shard:{k};".encode() for k in ("s1", "s2", "s3")}


def digest(data: bytes) -> dict[str, Any]:
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "head": data[:12].decode("latin-1")}


def s3_channel(name: str, uri: str, mode: str | None, distribution: str = "FullyReplicated") -> dict[str, Any]:
    ch: dict[str, Any] = {"ChannelName": name, "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": uri, "S3DataDistributionType": distribution}}}
    if mode is not None:
        ch["InputMode"] = mode
    return ch


def pipe_job(server: Any, name: str, hosts: int = 2) -> dict[str, Any]:
    bucket = server.extra["bucket"]
    put_object(server, f"src/{name}.tar.gz", train_py_tarball(SCRIPT))
    for key, data in TRAIN.items():
        put_object(server, f"input/{name}/train/{key}", data)
    for key, data in SHARD.items():
        put_object(server, f"input/{name}/shard/{key}", data)
    put_object(server, f"input/{name}/files/f.txt", b"file-mode")
    body = job_request(name, bucket, {"sagemaker_program": '"train.py"',
                                      "sagemaker_submit_directory": f'"s3://{bucket}/src/{name}.tar.gz"'})
    body["AlgorithmSpecification"]["TrainingImage"] = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
    body["AlgorithmSpecification"]["TrainingInputMode"] = "Pipe"  # the job's default; "files" overrides it
    body["ResourceConfig"]["InstanceCount"] = hosts
    body["InputDataConfig"] = [
        s3_channel("train", f"s3://{bucket}/input/{name}/train", None),
        s3_channel("shard", f"s3://{bucket}/input/{name}/shard", "Pipe", "ShardedByS3Key"),
        s3_channel("files", f"s3://{bucket}/input/{name}/files", "File"),
    ]
    body.pop("DebugRuleConfigurations")
    body.pop("DebugHookConfig")
    return body


@pytest.mark.slow
def test_a_pipe_mode_script_reads_its_epochs_from_the_fifos(
        request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:  # noqa: F811
    server = start_plane(request, make_server, monkeypatch, runtime, "s3")
    name = "pipe-mode"
    client = server.client()
    client.create_training_job(**pipe_job(server, name))
    job, _ = watch(client, name, timeout=240)
    assert job["TrainingJobStatus"] == "Completed", (job.get("FailureReason"), server.log()[-4000:])
    assert job["AlgorithmSpecification"]["TrainingInputMode"] == "Pipe"

    whole = b"".join(TRAIN[k] for k in sorted(TRAIN))  # the objects concatenated in key order
    by_host = {}
    for stream, text in host_logs(server, name).items():
        (line,) = [x for x in text.splitlines() if x.startswith("PIPE ")]
        report = json.loads(line[len("PIPE "):])
        by_host[report["host"]] = report
        assert report["train"] == [digest(whole), digest(whole)], stream  # every epoch whole
        assert report["files"] == {"f.txt": "file-mode"} and report["train_dir"] is False
        assert report["config"] == {
            "train": {"TrainingInputMode": "Pipe", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
            "shard": {"TrainingInputMode": "Pipe", "S3DistributionType": "ShardedByS3Key", "RecordWrapperType": "None"},
            "files": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
        }
        assert "channel train: Pipe input mode, 3 object(s)" in text
    assert sorted(by_host) == ["algo-1", "algo-2"]
    # ShardedByS3Key: sorted keys round-robin, as File mode shares them; each epoch the same share.
    assert by_host["algo-1"]["shard"] == [digest(SHARD["s1"] + SHARD["s3"])] * 2
    assert by_host["algo-2"]["shard"] == [digest(SHARD["s2"])] * 2


@pytest.mark.slow
def test_an_object_that_cannot_be_streamed_fails_the_job(
        request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:  # noqa: F811
    server = start_plane(request, make_server, monkeypatch, runtime, "s3")
    name = "pipe-broken"
    body = pipe_job(server, name, hosts=1)
    # A ManifestFile naming an object that does not exist: listed at start, unreadable when streamed.
    bucket = server.extra["bucket"]
    manifest = [{"prefix": f"s3://{bucket}/input/{name}/train/"}, "part-0", "missing-part"]
    put_object(server, f"input/{name}/train.manifest", json.dumps(manifest).encode())
    body["InputDataConfig"][0]["DataSource"]["S3DataSource"].update(
        S3DataType="ManifestFile", S3Uri=f"s3://{bucket}/input/{name}/train.manifest")
    client = server.client()
    client.create_training_job(**body)
    job, _ = watch(client, name, timeout=240)
    assert job["TrainingJobStatus"] == "Failed", server.log()[-4000:]
    assert (f"channel 'train' (Pipe input mode): cannot stream s3://{bucket}/input/{name}/train/missing-part: "
            "the object does not exist") in job["FailureReason"], job["FailureReason"]


STALL = r'''
import os, time
with open("/opt/ml/input/data/train_0", "rb") as f:
    f.read(10)  # then never reads on: the feeder waits for room in the pipe
print("STALLED", flush=True)
time.sleep(600)
'''


@pytest.mark.slow
def test_stopping_a_pipe_job_leaves_nothing_running(
        request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:  # noqa: F811
    server = start_plane(request, make_server, monkeypatch, runtime, "s3")
    name = "pipe-stop"
    body = pipe_job(server, name, hosts=1)
    put_object(server, f"src/{name}.tar.gz", train_py_tarball(STALL))
    client = server.client()
    client.create_training_job(**body)
    deadline = time.monotonic() + 180
    while not any("STALLED" in t for t in host_logs(server, name).values()):
        assert time.monotonic() < deadline, server.log()[-4000:]
        time.sleep(0.5)
    client.stop_training_job(TrainingJobName=name)
    job, _ = watch(client, name, timeout=120)
    assert job["TrainingJobStatus"] == "Stopped", (job.get("FailureReason"), server.log()[-4000:])
    assert still_running(request, runtime, name) == []
