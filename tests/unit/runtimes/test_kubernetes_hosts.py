"""The multi-instance host contract on Kubernetes (murphy.runtimes.kubernetes_hosts): every host
named in the anchor's files, murphy-init's patch making them this pod's from its index, and the
toolkit's own host (murphy.container.hostenv) on each pod the fake's Job controller makes from
the one template; what ``murphy kubernetes render`` prints is what the runtime creates."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from murphy.container import distributed
from murphy.container.env import OptMl, read_json
from murphy.container.hostenv import HostError, current_host, host_environment
from murphy.container.toolkit import Toolkit, ToolkitError, read_resource_config
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
    assert cluster["host_index_env"] == "JOB_COMPLETION_INDEX"
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


def _patched_config(tmp_path: Path, files: dict[str, str], init: dict[str, Any], env: dict[str, str]) -> OptMl:
    """``/opt/ml`` of one pod after its murphy-init ran (its script, with its environment)."""
    opt_ml = OptMl(str(tmp_path / "opt" / "ml"))
    Path(opt_ml.config_dir).mkdir(parents=True)
    for fname, text in files.items():
        Path(opt_ml.config_file(fname)).write_text(text)
    argv = shlex.split(init["command"][2].split("; python3 -c ", 1)[1])
    subprocess.run([sys.executable, "-c", argv[0], opt_ml.config_dir], check=True, env={**os.environ, **env})
    return opt_ml


def test_each_pod_made_from_the_one_template_is_its_own_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from murphy.runtimes.kubernetes_fake import FakeCluster, podenv
    from murphy.runtimes.kubernetes_fake.kinds import BY_KEY

    # The fake's Job controller makes the pods (as the real one: index annotation and label,
    # hostname, JOB_COMPLETION_INDEX), its kubelet computes each container's environment.
    cluster = FakeCluster(str(tmp_path / "fake"), namespaces=("team-a",))
    objs = ko.job_objects(plan(2), [], OPTS)
    plural = {"ConfigMap": "configmaps", "Secret": "secrets", "Service": "services", "Job": "jobs"}
    for obj in objs:
        cluster.store.create(BY_KEY[plural[obj["kind"]]], "team-a", obj)
    cluster.jobs.sync_all()
    pods = sorted(cluster.store.iter_all("pods"), key=kh.pod_index)
    name = kn.training_name("rid", plan(2))
    assert [kh.pod_index(p) for p in pods] == [0, 1]
    for i, pod in enumerate(pods):
        meta, spec = pod["metadata"], pod["spec"]
        assert meta["annotations"][kh.INDEX_ANNOTATION] == meta["labels"][kh.INDEX_ANNOTATION] == str(i)
        assert (spec["hostname"], spec["subdomain"]) == (f"{name}-{i}", name)
        assert meta["generateName"] == f"{name}-{i}-"
        init, algo = spec["initContainers"][0], spec["containers"][0]
        # Appended by the controller to a container that lacks it; murphy-init's own one is kept.
        assert [e for e in init["env"] if e["name"] == "JOB_COMPLETION_INDEX"] == [kh.index_env()]
        assert algo["env"][-1]["name"] == "JOB_COMPLETION_INDEX"
        assert [e["name"] for e in algo["env"]].count("JOB_COMPLETION_INDEX") == 1
        init_env = podenv.container_env(cluster.store, pod, init, {})
        algo_env = podenv.container_env(cluster.store, pod, algo, {})
        assert init_env["JOB_COMPLETION_INDEX"] == algo_env["JOB_COMPLETION_INDEX"] == str(i)
        assert algo_env["SM_CURRENT_HOST"] == "algo-1"  # the one template's: algo-1's on every pod

        host = f"algo-{i + 1}"
        opt_ml = _patched_config(tmp_path / f"pod-{i}", objs[0]["data"], init, init_env)
        rc = read_json(opt_ml.config_file("resourceconfig.json"))
        for key, value in algo_env.items():
            if key.startswith("SM_") or key == "JOB_COMPLETION_INDEX":
                monkeypatch.setenv(key, value)
        toolkit = Toolkit(opt_ml)
        toolkit.config = read_json(opt_ml.config_file("murphy.json"))
        toolkit.resource_config = read_resource_config(opt_ml)
        toolkit.this_host()
        program = {**algo_env, **toolkit.program_env}
        assert program["SM_CURRENT_HOST"] == host and rc["current_host"] == host
        assert json.loads(program["SM_RESOURCE_CONFIG"]) == rc
        training_env = json.loads(program["SM_TRAINING_ENV"])
        assert (training_env["current_host"], training_env["is_master"]) == (host, i == 0)
        assert training_env["resource_config"] == rc and training_env["hosts"] == ["algo-1", "algo-2"]
        assert json.loads(program["SM_HOSTS"]) == ["algo-1", "algo-2"]
        assert program["MASTER_ADDR"] == f"{name}-0.{name}"
        # Everything else is the template's, unchanged.
        assert {k for k in program if program[k] != algo_env.get(k)} == ({"SM_CURRENT_HOST", "SM_RESOURCE_CONFIG",
                                                                          "SM_TRAINING_ENV"} if i else set())
        argv = distributed.torchrun_argv("python", "train.py", [], toolkit.config["cluster"], 1)
        assert argv[argv.index("--node_rank") + 1] == str(i)
        assert argv[argv.index("--master_addr") + 1] == f"{name}-0.{name}"


def test_the_toolkit_refuses_files_that_are_not_its_pods(tmp_path: Path) -> None:
    cluster = {"hosts": ["algo-1", "algo-2"], "current_host": "algo-1", "host_index_env": "JOB_COMPLETION_INDEX"}
    rc = {"current_host": "algo-1", "hosts": ["algo-1", "algo-2"]}
    assert current_host(cluster, rc, {"JOB_COMPLETION_INDEX": "0"}) == "algo-1"
    with pytest.raises(HostError, match=r"this pod is algo-2 \(JOB_COMPLETION_INDEX=1\), but resourceconfig.json says 'algo-1'"):
        current_host(cluster, rc, {"JOB_COMPLETION_INDEX": "1"})  # murphy-init did not patch them
    with pytest.raises(HostError, match="JOB_COMPLETION_INDEX is not set"):
        current_host(cluster, rc, {})
    with pytest.raises(HostError, match="JOB_COMPLETION_INDEX=2, but the job has 2 host"):
        current_host(cluster, rc, {"JOB_COMPLETION_INDEX": "2"})
    # Without host_index_env (process, Docker: each host has its own environment): the file's.
    assert current_host({"hosts": ["algo-1", "algo-2"], "current_host": "algo-2"}, {"current_host": "algo-2"}, {}) == "algo-2"
    assert current_host(None, {}, {}) is None
    # A runtime that set no SM_* (an image run as is) gets none; one that agrees, no change.
    assert host_environment({}, "algo-2", rc) == {}
    same = {"SM_CURRENT_HOST": "algo-1", "SM_RESOURCE_CONFIG": json.dumps(rc),
            "SM_TRAINING_ENV": json.dumps({"current_host": "algo-1", "is_master": True, "resource_config": rc})}
    assert host_environment(same, "algo-1", rc) == {}
    # The toolkit fails the host with the reason (a failure file), never runs it as another host.
    opt_ml = OptMl(str(tmp_path / "opt" / "ml"))
    Path(opt_ml.config_dir).mkdir(parents=True)
    Path(opt_ml.config_file("resourceconfig.json")).write_text(json.dumps(rc))
    toolkit = Toolkit(opt_ml)
    toolkit.config, toolkit.resource_config = {"cluster": cluster}, read_resource_config(opt_ml)
    with pytest.raises(ToolkitError, match="did not run"), pytest.MonkeyPatch.context() as mp:
        mp.setenv("JOB_COMPLETION_INDEX", "1")
        toolkit.this_host()


def test_render_prints_what_the_runtime_creates_for_several_hosts(tmp_path: Path) -> None:
    from murphy.runtimes.kubernetes import KubernetesRuntime
    from murphy.runtimes.kubernetes_client import FakeKubeApi

    # render gets the job's one plan (no hosts named); the runtime one plan per host.
    rendered = ko.job_objects(plan(2), [], OPTS)
    hosts = ("algo-1", "algo-2")
    per_host = [dataclasses.replace(plan(2), container_name=c, current_host=h, hosts=hosts,
                                    first_host_container="Job-1-training")
                for c, h in (("Job-1-training-2", "algo-2"), ("Job-1-training", "algo-1"))]
    api = FakeKubeApi(namespace="team-a")
    rt = KubernetesRuntime(tmp_path / "containers", api, OPTS)
    for p in per_host:
        rt.launch(p)
    for want in rendered:
        have = api.objects[(want["kind"], want["metadata"]["name"])]
        assert have["metadata"]["labels"] == want["metadata"]["labels"], want["kind"]
        if want["kind"] == "Secret":
            # The credentials (and so the Secret's spec hash): the key the runtime issued for
            # this job, render's placeholders (or --credentials-from-env). All else is equal.
            def unhashed(o: dict[str, Any]) -> dict[str, str]:
                return {k: v for k, v in o["metadata"]["annotations"].items() if k != "murphy.io/spec-hash"}
            assert unhashed(have) == unhashed(want)
            continue
        assert have["metadata"]["annotations"] == want["metadata"]["annotations"], want["kind"]
        for key in ("data", "spec"):
            assert have.get(key) == want.get(key), (want["kind"], key)


def test_every_host_name_resolves_in_a_pod_through_hostaliases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """algo-<k> is no DNS name on a cluster: the toolkit maps each host to its pod's fully
    qualified name in a HOSTALIASES file for the program (glibc asks DNS for the alias as given)."""
    from murphy.container import hostenv

    name = kn.training_name("rid", plan(3))
    cluster = kh.cluster_doc("rid", plan(3))
    fqdn = f"{name}-1.{name}.team-a.svc.cluster.example"
    expected = "".join(f"algo-{k + 1} {name}-{k}.{name}.team-a.svc.cluster.example\n" for k in range(3))
    assert hostenv.host_aliases(cluster, "algo-2", fqdn) == expected
    # Not a pod of the job's Service, or no completion index (process, Docker): nothing to map.
    assert hostenv.host_aliases(cluster, "algo-2", "laptop.local") is None
    assert hostenv.host_aliases(cluster, "algo-2", f"{name}-1.{name}") is None
    assert hostenv.host_aliases({**cluster, "host_index_env": None}, "algo-2", fqdn) is None
    # The toolkit writes it and points the program at it; a user's own HOSTALIASES wins.
    monkeypatch.setattr("socket.getfqdn", lambda *a: fqdn)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.delenv("HOSTALIASES", raising=False)
    toolkit = Toolkit(OptMl(str(tmp_path / "opt" / "ml")))
    toolkit._alias_hosts(cluster, "algo-2")
    assert toolkit.program_env["HOSTALIASES"] == str(tmp_path / "murphy-hostaliases")
    assert (tmp_path / "murphy-hostaliases").read_text() == expected
    monkeypatch.setenv("HOSTALIASES", "/home/me/aliases")
    mine = Toolkit(OptMl(str(tmp_path / "opt" / "ml")))
    mine._alias_hosts(cluster, "algo-2")
    assert "HOSTALIASES" not in mine.program_env
