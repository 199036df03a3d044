"""The multi-instance host contract on Kubernetes (murphy.runtimes.kubernetes_hosts): every host
named in the anchor's files, and murphy-init's patch making them this pod's from its index."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from murphy.runtimes import kubernetes_hosts as kh
from murphy.runtimes import kubernetes_names as kn
from murphy.runtimes import kubernetes_objects as ko
from murphy.runtimes.base import TrainingPlan

OPTS = ko.KubernetesOptions(namespace="team-a", runtime_id="rid", s3_endpoint_url="http://s3:8333")


def plan(hosts: int) -> TrainingPlan:
    return TrainingPlan(container_name="Job-1-training", job_name="Job-1", image="murphy/pytorch-cpu:latest",
                        hyperparameters={"sagemaker_program": '"train.py"'}, environment={}, instance_type="ml.m5.xlarge",
                        instance_count=hosts, debug_hook_config={"S3OutputPath": "s3://b/debug"},
                        tensor_uri="s3://b/debug/Job-1/debug-output", output_uri="s3://b/o/Job-1/output")


def test_three_hosts_each_pod_becomes_its_own_host(tmp_path: Path) -> None:
    objs = ko.job_objects(plan(3), [], OPTS)
    cm, job = objs[0], objs[-1]
    assert [o["kind"] for o in objs] == ["ConfigMap", "Secret", "Service", "Job"]
    name = kn.training_name("rid", plan(3))
    rc = json.loads(cm["data"]["resourceconfig.json"])
    assert rc["hosts"] == ["algo-1", "algo-2", "algo-3"] and rc["current_host"] == "algo-1"
    cluster = json.loads(cm["data"]["murphy.json"])["cluster"]
    assert cluster["addresses"]["algo-2"] == f"{name}-1.{name}" and cluster["master_addr"] == f"{name}-0.{name}"
    pod = job["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert json.loads(env["SM_HOSTS"]) == ["algo-1", "algo-2", "algo-3"]
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == (f"{name}-0.{name}", "7777")
    init = pod["initContainers"][0]
    assert init["env"] == [kh.index_env()]
    # The init script's patch, run as murphy-init runs it, for completion index 2.
    cfg = tmp_path / "config"
    cfg.mkdir()
    for fname, text in cm["data"].items():
        (cfg / fname).write_text(text)
    script = init["command"][2].split("; python3 -c ", 1)[1]
    argv = shlex.split(script)
    subprocess.run([sys.executable, "-c", argv[0], str(cfg)], check=True, env={**os.environ, "JOB_COMPLETION_INDEX": "2"})
    assert json.loads((cfg / "resourceconfig.json").read_text())["current_host"] == "algo-3"
    doc = json.loads((cfg / "murphy.json").read_text())
    assert doc["cluster"]["current_host"] == "algo-3" and doc["upload_model"] is False
    assert argv[1] == "/opt/ml/input/config"


def test_one_host_is_unchanged() -> None:
    objs = ko.job_objects(plan(1), [], OPTS)
    assert json.loads(objs[0]["data"]["murphy.json"]).get("cluster") is None  # no cluster for one host
    assert "python3" not in objs[-1]["spec"]["template"]["spec"]["initContainers"][0]["command"][2]
