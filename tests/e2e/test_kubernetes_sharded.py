"""``ShardedByS3Key`` on the Kubernetes runtime, black-box: boto3 → ``murphy server --runtime
kubernetes`` → murphy's fake API server, whose kubelet runs the Indexed Job's two pods as local
processes. Every pod is made from one template; each learns its host from its completion index,
and downloads that host's share (the same assignment as on the other runtimes,
``tests/e2e/test_sharded_inputs.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from test_kubernetes_runtime_e2e import cluster, job_request, start, watch  # noqa: F401 (fixture)
from test_multi_instance import host_logs
from test_sharded_inputs import FULL, SCRIPT, TRAIN, channel, reports

from murphy.runtimes.kubernetes_fake import FakeCluster
from sourcetar import train_py_tarball


@pytest.mark.slow
def test_each_pod_downloads_its_hosts_share(make_server: Any, monkeypatch: pytest.MonkeyPatch,
                                            request: pytest.FixtureRequest, cluster: FakeCluster) -> None:  # noqa: F811
    from murphy.storage import open_store

    server = start(make_server, monkeypatch, request, cluster)
    client, bucket, name = server.client(), server.extra["bucket"], "k8s-sharded"
    store = open_store(f"s3://{bucket}")
    store.put("src/seen.tar.gz", train_py_tarball(SCRIPT))
    for key in TRAIN:
        store.put(f"input/{name}/train/{key}", f"train:{key}".encode())
    store.put(f"input/{name}/listed/only.csv", b"listed:only.csv")  # one object: algo-1's
    for key in FULL:
        store.put(f"input/{name}/full/{key}", f"full:{key}".encode())
    body = job_request(name, bucket, {"sagemaker_program": '"train.py"',
                                      "sagemaker_submit_directory": f'"s3://{bucket}/src/seen.tar.gz"'}, rules=False)
    body.pop("DebugHookConfig")
    body["AlgorithmSpecification"]["TrainingImage"] = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
    body["ResourceConfig"]["InstanceCount"] = 2
    body["InputDataConfig"] = [
        channel("train", f"s3://{bucket}/input/{name}/train", "ShardedByS3Key"),
        channel("listed", f"s3://{bucket}/input/{name}/listed", "ShardedByS3Key"),
        channel("full", f"s3://{bucket}/input/{name}/full", "FullyReplicated"),
    ]
    client.create_training_job(**body)
    job = watch(client, name, timeout=240)
    assert job["TrainingJobStatus"] == "Completed", (job.get("FailureReason"), server.log()[-4000:])
    by_host = {}
    for stream, text in host_logs(server, name).items():
        (report,) = reports(text)
        by_host[stream.split("/")[1].rsplit("-", 1)[0]] = report
    assert sorted(by_host) == ["algo-1", "algo-2"]
    one, two = by_host["algo-1"], by_host["algo-2"]
    # The pod's host as its resourceconfig.json names it (what the toolkit shards by).
    assert (one["host"], two["host"]) == ("algo-1", "algo-2")
    # And the pod's environment agrees (each pod fixes SM_CURRENT_HOST from its completion index).
    assert (one["env_host"], two["env_host"]) == ("algo-1", "algo-2")
    assert (list(one["train"]), list(two["train"])) == (["a.csv", "c.csv", "sub/deeper/e.csv"], ["b.csv", "sub/d.csv"])
    assert (list(one["listed"]), two["listed"]) == (["only.csv"], {})
    assert one["full"] == two["full"] == {k: f"full:{k}" for k in FULL}
