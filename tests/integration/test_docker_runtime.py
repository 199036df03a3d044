"""DockerRuntime with a real engine and murphy's images: the demo, script mode, rules, isolation,
resources, OOM, stop, re-attach, vanished containers, and S3 through the gateway.

Needs dockerd and `make images-cpu` (the `docker_engine` fixture skips without them locally and
fails in CI).
"""

from __future__ import annotations

import io
import json
import signal
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runtime_support import DEMO, PYTORCH, RULES, TRAIN_PY, RuntimeEnv, tarball

import servers
from murphy.jobs.model import Handle
from murphy.runtimes.base import Channel, ContainerState, RulePlan, TrainingPlan
from murphy.runtimes.catalog import ImageCatalog
from murphy.runtimes.docker import DockerRuntime
from murphy.runtimes.docker_spec import DockerOptions, StoreAccess

pytestmark = pytest.mark.docker


class Env(RuntimeEnv):
    def __init__(self, root: Path, client: Any) -> None:
        self.client = client
        super().__init__(root)

    def runtime(self, **options: Any) -> DockerRuntime:
        opts = DockerOptions(**options) if options else None
        return DockerRuntime(self.root, ImageCatalog(), StoreAccess(buckets_dir=str(self.buckets)), options=opts)

    def close(self) -> None:
        for h in self.handles:
            self.rt.remove(h)
        self.rt.close()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, docker_engine: Any) -> Iterator[Env]:
    e = Env(tmp_path_factory.mktemp("docker-runtime"), docker_engine)
    yield e
    e.close()


def script_plan(name: str, mode: str, **extra: Any) -> TrainingPlan:
    fields: dict[str, Any] = {
        "container_name": name, "job_name": name, "image": PYTORCH, "environment": {},
        "hyperparameters": {"sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://b/src/sourcedir.tar.gz"',
                            "mode": json.dumps(mode), "epochs": "2"},
        "instance_type": "ml.m5.xlarge", "instance_count": 1, "output_uri": f"s3://b/out/{name}/output",
        "account": "111122223333", "region": "us-west-2",
    }
    fields.update(extra)
    return TrainingPlan(**fields)


def output_file(env: Env, name: str, member: str) -> Any:
    with tarfile.open(env.bucket(f"out/{name}/output/output.tar.gz")) as tar:
        return json.loads(tar.extractfile(member).read())  # type: ignore[union-attr]


# ---- the demo image, its tensors and a rule on them ------------------------------------------


@pytest.fixture(scope="module")
def demo(env: Env) -> tuple[TrainingPlan, Handle, ContainerState]:
    plan = TrainingPlan(
        container_name="demo-training", job_name="demo", image=DEMO,
        hyperparameters={"lr": "100", "scale": "100000000000", "steps": "10", "debug_frequency": "1"},
        environment={}, instance_type="ml.m5.xlarge", instance_count=1,
        debug_hook_config={"S3OutputPath": "s3://b/debug", "CollectionConfigurations": []},
        tensor_uri="s3://b/debug/demo/debug-output", output_uri="s3://b/out/demo/output",
    )
    h = env.launch(plan)
    return plan, h, env.wait(h)


def test_demo_trains_in_its_image_and_its_tensors_and_model_are_uploaded(
        env: Env, demo: tuple[TrainingPlan, Handle, ContainerState]) -> None:
    _, h, st = demo
    assert (st.phase, st.exit_code, st.failure, st.stage) == ("exited", 0, None, "Uploading"), st.log_tail
    assert st.started_at is not None and st.ended_at is not None and st.started_at < st.ended_at
    events = env.rt.read_logs(h).events
    steps = [e for e in events if e.message.startswith("Step=")]
    assert [e.message.split(",")[0] for e in steps] == [f"Step={i}" for i in range(10)]
    assert steps[2].message == "Step=2, Loss=nan"
    tensors = env.bucket("debug/demo/debug-output")
    assert len(list((tensors / "index").rglob("*.json"))) == 10
    assert (tensors / "training_job_end.ts").read_bytes() == b""
    with tarfile.open(env.bucket("out/demo/output/model.tar.gz")) as tar:
        assert tar.getnames() == ["model.pt"]
    hook = json.loads((Path(h.data["opt_ml"]) / "input" / "config" / "debughookconfig.json").read_text())
    assert hook["LocalPath"] == "/opt/ml/output/tensors"  # the container's path, not the host's
    attrs = env.client.api.inspect_container(h.id)
    assert attrs["Config"]["Image"] == DEMO
    assert attrs["Config"]["Labels"]["io.murphy.job"] == "demo"


def test_launching_twice_gives_one_container(env: Env, demo: tuple[TrainingPlan, Handle, ContainerState]) -> None:
    plan, h, _ = demo
    assert env.rt.launch(plan) == h
    assert env.runtime().launch(plan) == h  # another instance (a restarted service) too


def test_rule_container_finds_the_exploding_tensor(env: Env, demo: tuple[TrainingPlan, Handle, ContainerState]) -> None:
    plan = RulePlan(container_name="demo-rule-0", job_name="demo", rule_name="ExplodingTensor", image=RULES,
                    rule_parameters={"rule_to_invoke": "ExplodingTensor"},
                    base_trial_uri="s3://b/debug/demo/debug-output", result_uri="s3://b/rules/demo/0",
                    environment={"MURPHY_POLL_INTERVAL": "0.05"})
    h = env.launch(plan)
    st = env.wait(h)
    assert (st.phase, st.exit_code, st.failure) == ("exited", 0, None), st.log_tail
    result = json.loads(env.bucket("rules/demo/0/result.json").read_text())
    assert (result["status"], result["step"], result["tensor"]) == ("IssuesFound", 2, "LinearRegression_weight")
    assert env.client.api.inspect_container(h.id)["Config"]["Image"] == "murphy/rule-evaluator:latest"


# ---- script mode, isolation, resources -------------------------------------------------------


def test_script_mode_runs_the_entry_point_with_channels_and_hyperparameters(env: Env) -> None:
    plan = script_plan("sm-ok", "ok", channels=(Channel("train", "s3://b/data/train"), Channel("one", "s3://b/data/one.csv")))
    h = env.launch(plan)
    st = env.wait(h)
    assert (st.phase, st.exit_code, st.failure) == ("exited", 0, None), st.log_tail
    assert 'argv ["--epochs", "2", "--mode", "ok"]' in [e.message for e in env.rt.read_logs(h).events]
    seen = output_file(env, "sm-ok", "seen.json")
    assert seen == {"files": ["a.csv", "sub/b.csv"], "one": ["one.csv"], "cwd": "/opt/ml/code", "job": "sm-ok",
                    "epochs": "2", "hook": None}
    with tarfile.open(env.bucket("out/sm-ok/output/model.tar.gz")) as tar:
        assert tar.extractfile("model.bin").read() == b"weights"  # type: ignore[union-attr]
    env.rt.remove(h)
    assert env.rt.status(h).phase == "missing"  # the container is gone ...
    assert 'argv ["--epochs", "2", "--mode", "ok"]' in [e.message for e in env.rt.read_logs(h).events]  # ... its log is not


def test_containers_are_isolated(env: Env) -> None:
    h = env.launch(script_plan("sm-probe", "probe", instance_type="ml.m5.large"))
    st = env.wait(h)
    assert (st.phase, st.exit_code) == ("exited", 0), st.log_tail
    facts = output_file(env, "sm-probe", "probe.json")
    assert facts["uid"] == 1000 and facts["gid"] == 1000
    assert facts["nets"] == ["lo"]  # no network at all
    assert facts["internet"] is False
    assert facts["root_writable"] is False
    assert facts["CapEff"] == "0000000000000000"
    assert facts["NoNewPrivs"] == "1"
    host = env.client.api.inspect_container(h.id)["HostConfig"]
    assert host["ReadonlyRootfs"] is True and host["NetworkMode"] == "none" and host["PidsLimit"] == 1024
    assert host["Memory"] == min(8 << 30, env.rt.host().memory_bytes)  # ml.m5.large: 2 vCPUs, 8 GiB
    assert host["NanoCpus"] == min(2, env.rt.host().cpus) * 10**9
    assert facts["cpus"] == str(min(2, env.rt.host().cpus))


def test_failure_file_becomes_the_failure(env: Env) -> None:
    st = env.wait(env.launch(script_plan("sm-fail", "fail")))
    assert (st.phase, st.exit_code, st.failure) == ("exited", 3, "ValueError: learning rate too high")


def test_toolkit_errors_are_failures_too(env: Env) -> None:
    st = env.wait(env.launch(script_plan("sm-nodata", "ok", channels=(Channel("train", "s3://b/no/such/prefix"),))))
    assert (st.phase, st.exit_code) == ("exited", 1)
    assert st.failure is not None and "channel 'train'" in st.failure and "s3://b/no/such/prefix" in st.failure


def test_out_of_memory_is_reported(env: Env) -> None:
    rt = env.runtime(max_memory_bytes=256 << 20)
    h = env.launch(script_plan("sm-oom", "oom"), rt=rt)
    st = env.wait(h, rt=rt)
    assert st.phase == "exited" and st.exit_code == 137, st.log_tail
    assert st.failure is not None and st.failure.startswith("OutOfMemoryError") and "0.25 GiB" in st.failure


def test_gpu_instance_type_on_a_host_without_gpus_fails_at_launch(env: Env) -> None:
    if env.rt.host().gpus_available:
        pytest.skip("this Docker host has the NVIDIA runtime")
    from murphy.exceptions import RuntimeBackendError

    with pytest.raises(RuntimeBackendError, match=r"ml\.p3\.2xlarge asks for GPUs.*docs/gpu.md"):
        env.rt.launch(script_plan("sm-gpu", "ok", instance_type="ml.p3.2xlarge"))
    assert env.client.containers.list(all=True, filters={"name": "sm-gpu"}) == []


def test_unknown_image_is_refused_with_how_to_build(env: Env) -> None:
    from murphy.exceptions import RuntimeBackendError

    with pytest.raises(RuntimeBackendError, match=r"acme/trainer:1.*make images"):
        env.rt.launch(script_plan("unknown", "ok", image="acme/trainer:1"))


# ---- stop, re-attach, containers removed behind the runtime's back ---------------------------


def test_sigterm_stops_a_program_and_training_end_is_still_marked(env: Env) -> None:
    plan = script_plan("sm-term", "sleep", tensor_uri="s3://b/debug/sm-term/debug-output",
                       debug_hook_config={"S3OutputPath": "s3://b/debug"})
    h = env.launch(plan)
    env.wait_log(h, "ready")
    assert env.rt.status(h).phase == "running" and env.rt.status(h).stage == "Training"
    env.rt.stop(h)
    st = env.wait(h, timeout=30)
    assert (st.phase, st.exit_code) == ("exited", 128 + signal.SIGTERM)
    assert env.bucket("debug/sm-term/debug-output/training_job_end.ts").exists()


def test_a_program_that_ignores_sigterm_is_killed_by_force(env: Env) -> None:
    h = env.launch(script_plan("sm-ignore", "ignore-term"))
    env.wait_log(h, "ready")
    env.rt.stop(h)
    time.sleep(1.0)
    # The toolkit forwards SIGTERM and waits: the program ignoring it keeps the container up.
    assert env.rt.status(h).phase == "running"
    env.rt.stop(h, force=True)
    st = env.rt.status(h)
    assert (st.phase, st.exit_code) == ("exited", 128 + signal.SIGKILL)
    assert st.failure is not None and "SIGKILL" in st.failure
    env.rt.stop(h, force=True)  # stopping an exited container is a no-op


def test_a_new_runtime_instance_reattaches_and_sees_the_end(env: Env) -> None:
    h = env.launch(script_plan("sm-reattach", "sleep", environment={"SLEEP_S": "2"}))
    env.wait_log(h, "ready")
    other = env.runtime()
    restored = Handle(**json.loads(json.dumps(h.__dict__)))  # as the job store gives it back
    assert other.status(restored).phase == "running"
    st = env.wait(restored, rt=other, timeout=60)
    assert (st.phase, st.exit_code) == ("exited", 0)
    messages = [e.message for e in other.read_logs(restored).events]
    assert messages.index("ready") < messages.index("done")


def test_container_removed_behind_the_runtimes_back_is_missing(env: Env) -> None:
    h = env.launch(script_plan("sm-vanish", "sleep"))
    env.wait_log(h, "ready")
    env.client.api.remove_container(h.id, force=True)
    st = env.rt.status(h)
    assert st.phase == "missing" and st.failure is not None and "vanished" in st.failure
    assert "ready" in st.log_tail  # what was copied before it vanished
    env.rt.stop(h, force=True)  # no error for a vanished container


# ---- a real S3 endpoint through the gateway --------------------------------------------------


@pytest.mark.s3
def test_containers_reach_s3_through_the_gateway_only(tmp_path: Path, docker_engine: Any,
                                                       seaweedfs_server: servers.S3Server,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = servers.new_bucket(seaweedfs_server)
    s3 = seaweedfs_server.client()
    s3.put_object(Bucket=bucket, Key="src/sourcedir.tar.gz", Body=tarball({"train.py": TRAIN_PY}))
    s3.put_object(Bucket=bucket, Key="data/train/a.csv", Body=b"1\n")
    s3.put_object(Bucket=bucket, Key="data/train/sub/b.csv", Body=b"2\n")
    s3.put_object(Bucket=bucket, Key="data/one.csv", Body=b"3\n")
    for k, v in seaweedfs_server.env().items():
        monkeypatch.setenv(k, v)
    rt = DockerRuntime(tmp_path / "containers", ImageCatalog(), StoreAccess(endpoint_url=seaweedfs_server.endpoint_url))
    try:
        plan = script_plan(
            "s3-ok", "ok", output_uri=f"s3://{bucket}/out/s3-ok/output",
            tensor_uri=f"s3://{bucket}/debug/s3-ok/debug-output", debug_hook_config={"S3OutputPath": f"s3://{bucket}/debug"},
            channels=(Channel("train", f"s3://{bucket}/data/train"), Channel("one", f"s3://{bucket}/data/one.csv")),
            hyperparameters={"sagemaker_program": '"train.py"', "mode": '"ok"', "epochs": "2",
                             "sagemaker_submit_directory": json.dumps(f"s3://{bucket}/src/sourcedir.tar.gz")},
        )
        h = rt.launch(plan)
        deadline = time.monotonic() + 120
        while (st := rt.status(h)).phase in ("running", "pending") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (st.phase, st.exit_code, st.failure) == ("exited", 0, None), st.log_tail
        body = s3.get_object(Bucket=bucket, Key="out/s3-ok/output/output.tar.gz")["Body"].read()
        with tarfile.open(fileobj=io.BytesIO(body)) as tar:
            seen = json.loads(tar.extractfile("seen.json").read())  # type: ignore[union-attr]
        assert seen["files"] == ["a.csv", "sub/b.csv"] and seen["one"] == ["one.csv"]
        assert seen["hook"] == "/opt/ml/input/config/debughookconfig.json"
        s3.head_object(Bucket=bucket, Key="debug/s3-ok/debug-output/training_job_end.ts")
        s3.head_object(Bucket=bucket, Key="out/s3-ok/output/model.tar.gz")
        assert docker_engine.api.inspect_container(h.id)["HostConfig"]["NetworkMode"] == "none"
        rt.remove(h)
    finally:
        rt.close()
