"""Pipe input mode on the Kubernetes runtime, black-box: boto3 → ``murphy server --runtime
kubernetes`` → murphy's fake API server, whose kubelet runs the Indexed Job's two pods as local
processes. The same script and checks as ``tests/e2e/test_pipe_mode.py``: each pod's toolkit feeds
its FIFOs (a sharded Pipe channel: its own host's share) beside a File channel."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_kubernetes_runtime_e2e import cluster, job_request, start, watch  # noqa: F401 (fixture)
from test_multi_instance import host_logs
from test_pipe_mode import SCRIPT, SHARD, TRAIN, digest, s3_channel

from murphy.runtimes.kubernetes_fake import FakeCluster
from sourcetar import train_py_tarball


@pytest.mark.slow
def test_each_pod_streams_its_pipe_channels(make_server: Any, monkeypatch: pytest.MonkeyPatch,
                                            request: pytest.FixtureRequest, cluster: FakeCluster) -> None:  # noqa: F811
    from murphy.storage import open_store

    server = start(make_server, monkeypatch, request, cluster)
    client, bucket, name = server.client(), server.extra["bucket"], "k8s-pipe"
    store = open_store(f"s3://{bucket}")
    store.put("src/pipe.tar.gz", train_py_tarball(SCRIPT))
    for key, data in TRAIN.items():
        store.put(f"input/{name}/train/{key}", data)
    for key, data in SHARD.items():
        store.put(f"input/{name}/shard/{key}", data)
    store.put(f"input/{name}/files/f.txt", b"file-mode")
    body = job_request(name, bucket, {"sagemaker_program": '"train.py"',
                                      "sagemaker_submit_directory": f'"s3://{bucket}/src/pipe.tar.gz"'}, rules=False)
    body.pop("DebugHookConfig")
    body["AlgorithmSpecification"].update(
        TrainingImage="763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310", TrainingInputMode="Pipe")
    body["ResourceConfig"]["InstanceCount"] = 2
    body["InputDataConfig"] = [
        s3_channel("train", f"s3://{bucket}/input/{name}/train", None),
        s3_channel("shard", f"s3://{bucket}/input/{name}/shard", "Pipe", "ShardedByS3Key"),
        s3_channel("files", f"s3://{bucket}/input/{name}/files", "File"),
    ]
    client.create_training_job(**body)
    job = watch(client, name, timeout=240)
    assert job["TrainingJobStatus"] == "Completed", (job.get("FailureReason"), server.log()[-4000:])
    whole = b"".join(TRAIN[k] for k in sorted(TRAIN))
    by_host = {}
    for stream, text in host_logs(server, name).items():
        (line,) = [x for x in text.splitlines() if x.startswith("PIPE ")]
        report = json.loads(line[len("PIPE "):])
        by_host[report["host"]] = report
        assert report["train"] == [digest(whole), digest(whole)], stream
        assert report["files"] == {"f.txt": "file-mode"} and report["train_dir"] is False
        assert report["config"]["train"]["TrainingInputMode"] == "Pipe"
        assert report["config"]["files"]["TrainingInputMode"] == "File"
    assert sorted(by_host) == ["algo-1", "algo-2"]
    assert by_host["algo-1"]["shard"] == [digest(SHARD["s1"] + SHARD["s3"])] * 2
    assert by_host["algo-2"]["shard"] == [digest(SHARD["s2"])] * 2
