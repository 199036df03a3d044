"""ProcessRuntime with real processes and files: the demo image, script mode, rules, stop, re-attach.

Buckets are local directories (``MURPHY_S3_LOCAL_ROOT``), as in the embedded default.
"""

from __future__ import annotations

import io
import json
import os
import signal
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runtime_support import DEMO, PYTORCH, RULES, TRAIN_PY, RuntimeEnv, tarball

import servers
from murphy.exceptions import RuntimeBackendError
from murphy.jobs.model import Handle
from murphy.runtimes import procfs
from murphy.runtimes.base import Channel, ContainerState, RulePlan, TrainingPlan
from murphy.runtimes.catalog import ImageCatalog
from murphy.runtimes.process import ProcessRuntime


class Env(RuntimeEnv):
    def runtime(self, **options: Any) -> ProcessRuntime:
        return ProcessRuntime(self.root, ImageCatalog(), {"MURPHY_S3_LOCAL_ROOT": str(self.buckets)})

    def close(self) -> None:
        for h in self.handles:
            self.rt.stop(h, force=True)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    e = Env(tmp_path_factory.mktemp("process-runtime"))
    yield e
    e.close()


def script_plan(name: str, mode: str, **extra: Any) -> TrainingPlan:
    fields: dict[str, Any] = {
        "container_name": name, "job_name": name, "image": PYTORCH, "environment": {},
        "hyperparameters": {"sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://b/src/sourcedir.tar.gz"',
                            "mode": json.dumps(mode), "epochs": "2"},
        "instance_type": "ml.m5.xlarge", "instance_count": 1, "output_uri": f"s3://b/out/{name}/output",
    }
    fields.update(extra)
    return TrainingPlan(**fields)


def members(h: Handle) -> list[procfs.ProcStat]:
    return procfs.session_members(h.data["pgid"], h.data["start_time"], f"MURPHY_CONTAINER={h.data['dir']}")


def gone(h: Handle, timeout: float = 5) -> bool:
    """Every process of the container has ended (the shim exits just after writing exit.json)."""
    deadline = time.monotonic() + timeout
    while members(h) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not members(h)


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


def test_demo_trains_and_its_tensors_and_model_are_uploaded(env: Env, demo: tuple[TrainingPlan, Handle, ContainerState]) -> None:
    plan, h, st = demo
    assert (st.phase, st.exit_code, st.failure, st.stage) == ("exited", 0, None, "Uploading"), st.log_tail
    assert st.started_at is not None and st.ended_at is not None and st.started_at < st.ended_at
    events = env.rt.read_logs(h).events
    steps = [e for e in events if e.message.startswith("Step=")]
    assert [e.message.split(",")[0] for e in steps] == [f"Step={i}" for i in range(10)]
    assert steps[2].message == "Step=2, Loss=nan"
    assert all(st.started_at * 1000 <= e.timestamp_ms <= st.ended_at * 1000 for e in events)
    tensors = env.bucket("debug/demo/debug-output")
    assert (tensors / "collections/000000000/worker_0_collections.json").exists()
    assert len(list((tensors / "index").rglob("*.json"))) == 10
    assert (tensors / "training_job_end.ts").read_bytes() == b""
    with tarfile.open(env.bucket("out/demo/output/model.tar.gz")) as tar:
        assert tar.getnames() == ["model.pt"]
    config = Path(h.data["opt_ml"]) / "input" / "config"
    assert json.loads((config / "hyperparameters.json").read_text()) == plan.hyperparameters
    assert json.loads((config / "resourceconfig.json").read_text())["hosts"] == ["algo-1"]
    hook = json.loads((config / "debughookconfig.json").read_text())
    assert hook["LocalPath"] == str(Path(h.data["opt_ml"]) / "output" / "tensors")
    assert hook["S3OutputPath"] == "s3://b/debug"


def test_launching_twice_gives_one_container(env: Env, demo: tuple[TrainingPlan, Handle, ContainerState]) -> None:
    plan, h, _ = demo
    assert env.rt.launch(plan) == h
    assert env.runtime().launch(plan) == h  # another instance (a restarted service) too


def test_rule_evaluator_finds_the_exploding_tensor(env: Env, demo: tuple[TrainingPlan, Handle, ContainerState]) -> None:
    plan = RulePlan(container_name="demo-rule-0", job_name="demo", rule_name="ExplodingTensor", image=RULES,
                    rule_parameters={"rule_to_invoke": "ExplodingTensor"},
                    base_trial_uri="s3://b/debug/demo/debug-output", result_uri="s3://b/rules/demo/0",
                    environment={"MURPHY_POLL_INTERVAL": "0.05"})
    st = env.wait(env.launch(plan))
    assert (st.phase, st.exit_code, st.failure) == ("exited", 0, None), st.log_tail
    result = json.loads(env.bucket("rules/demo/0/result.json").read_text())
    assert (result["status"], result["step"], result["tensor"]) == ("IssuesFound", 2, "LinearRegression_weight")
    assert result["training_job_name"] == "demo" and result["rule_name"] == "ExplodingTensor"


# ---- script mode -----------------------------------------------------------------------------


def test_script_mode_runs_the_entry_point_with_channels_and_hyperparameters(env: Env) -> None:
    plan = script_plan("sm-ok", "ok", channels=(Channel("train", "s3://b/data/train"), Channel("one", "s3://b/data/one.csv")))
    h = env.launch(plan)
    st = env.wait(h)
    assert (st.phase, st.exit_code, st.failure) == ("exited", 0, None), st.log_tail
    assert 'argv ["--epochs", "2", "--mode", "ok"]' in [e.message for e in env.rt.read_logs(h).events]
    with tarfile.open(env.bucket("out/sm-ok/output/output.tar.gz")) as tar:
        seen = json.loads(tar.extractfile("seen.json").read())  # type: ignore[union-attr]
    assert seen == {"files": ["a.csv", os.path.join("sub", "b.csv")], "one": ["one.csv"],
                    "cwd": str(Path(h.data["opt_ml"]) / "code"), "job": "sm-ok", "epochs": "2", "hook": None}
    with tarfile.open(env.bucket("out/sm-ok/output/model.tar.gz")) as tar:
        assert tar.extractfile("model.bin").read() == b"weights"  # type: ignore[union-attr]
    env.rt.remove(h)
    opt_ml = Path(h.data["opt_ml"])
    assert not (opt_ml / "input" / "data").exists() and not (opt_ml / "code").exists()
    assert env.rt.status(h).exit_code == 0 and env.rt.read_logs(h).events  # logs and exit are kept


def test_failure_file_becomes_the_failure(env: Env) -> None:
    st = env.wait(env.launch(script_plan("sm-fail", "fail")))
    assert (st.phase, st.exit_code, st.failure) == ("exited", 3, "ValueError: learning rate too high")


def test_toolkit_errors_are_failures_too(env: Env) -> None:
    st = env.wait(env.launch(script_plan("sm-nodata", "ok", channels=(Channel("train", "s3://b/no/such/prefix"),))))
    assert (st.phase, st.exit_code) == ("exited", 1)
    assert st.failure is not None and "channel 'train'" in st.failure and "s3://b/no/such/prefix" in st.failure


def test_unknown_image_is_refused_before_anything_runs(env: Env) -> None:
    plan = script_plan("unknown", "ok", image="acme/trainer:1", hyperparameters={"lr": "1"})
    with pytest.raises(RuntimeBackendError, match="acme/trainer:1"):
        env.rt.launch(plan)
    assert not (env.root / "unknown").exists()


# ---- stop, re-attach, processes killed behind the runtime's back -----------------------------


def test_sigterm_stops_a_program_and_training_end_is_still_marked(env: Env) -> None:
    plan = script_plan("sm-term", "sleep", tensor_uri="s3://b/debug/sm-term/debug-output",
                       debug_hook_config={"S3OutputPath": "s3://b/debug"})
    h = env.launch(plan)
    env.wait_log(h, "ready")
    assert env.rt.status(h).phase == "running" and env.rt.status(h).stage == "Training"
    env.rt.stop(h)
    st = env.wait(h, timeout=20)
    assert (st.phase, st.exit_code) == ("exited", 128 + signal.SIGTERM)
    assert env.bucket("debug/sm-term/debug-output/training_job_end.ts").exists()
    assert gone(h)


def test_a_program_that_ignores_sigterm_is_killed_by_force(env: Env) -> None:
    h = env.launch(script_plan("sm-ignore", "ignore-term"))
    env.wait_log(h, "ready")
    env.rt.stop(h)
    time.sleep(0.5)
    assert env.rt.status(h).phase == "running"
    env.rt.stop(h, force=True)
    st = env.rt.status(h)
    assert (st.phase, st.exit_code) == ("exited", 128 + signal.SIGKILL)
    assert st.failure is not None and "SIGKILL" in st.failure
    assert members(h) == []
    env.rt.stop(h, force=True)  # stopping an exited container is a no-op


def test_a_new_runtime_instance_reattaches_and_sees_the_end(env: Env) -> None:
    h = env.launch(script_plan("sm-reattach", "sleep", environment={"SLEEP_S": "1.5"}))
    env.wait_log(h, "ready")
    other = env.runtime()
    restored = Handle(**json.loads(json.dumps(h.__dict__)))  # as the job store gives it back
    assert other.status(restored).phase == "running"
    deadline = time.monotonic() + 30
    while (st := other.status(restored)).phase == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (st.phase, st.exit_code) == ("exited", 0)
    messages = [e.message for e in other.read_logs(restored).events]
    assert messages.index("ready") < messages.index("done")


def test_container_killed_behind_the_runtimes_back_is_missing(env: Env) -> None:
    h = env.launch(script_plan("sm-vanish", "sleep"))
    env.wait_log(h, "ready")
    os.killpg(h.data["pgid"], signal.SIGKILL)  # the shim and the toolkit; the program lives on
    deadline = time.monotonic() + 5
    while (st := env.rt.status(h)).phase == "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert st.phase == "missing" and st.failure is not None and "vanished" in st.failure
    assert "ready" in st.log_tail
    deadline = time.monotonic() + 5  # SIGKILL takes effect asynchronously
    while any(m.pgid == h.data["pgid"] for m in members(h)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [m.pgid != h.data["pgid"] for m in members(h)] == [True]  # the orphaned program lives on
    env.rt.stop(h, force=True)
    assert members(h) == [] and env.rt.status(h).phase == "exited"


def test_toolkit_killed_behind_the_runtimes_back_is_exited_by_signal(env: Env) -> None:
    h = env.launch(script_plan("sm-kill9", "sleep"))
    env.wait_log(h, "ready")
    [toolkit] = [m.pid for m in members(h) if m.pgid == h.data["pgid"] and m.pid != h.data["pid"]]
    os.kill(toolkit, signal.SIGKILL)
    st = env.wait(h, timeout=10)
    assert (st.phase, st.exit_code) == ("exited", 128 + signal.SIGKILL)
    assert gone(h)  # the shim took the program down with the container


# ---- the same container contract on a real S3 endpoint ---------------------------------------


@pytest.mark.s3
def test_script_mode_on_a_real_s3_endpoint(tmp_path: Path, seaweedfs_server: servers.S3Server) -> None:
    bucket = servers.new_bucket(seaweedfs_server)
    s3 = seaweedfs_server.client()
    s3.put_object(Bucket=bucket, Key="src/sourcedir.tar.gz", Body=tarball({"train.py": TRAIN_PY}))
    s3.put_object(Bucket=bucket, Key="data/train/a.csv", Body=b"1\n")
    s3.put_object(Bucket=bucket, Key="data/train/sub/b.csv", Body=b"2\n")
    s3.put_object(Bucket=bucket, Key="data/one.csv", Body=b"3\n")
    rt = ProcessRuntime(tmp_path / "containers", ImageCatalog(), seaweedfs_server.env())
    plan = script_plan(
        "s3-ok", "ok", output_uri=f"s3://{bucket}/out/s3-ok/output", tensor_uri=f"s3://{bucket}/debug/s3-ok/debug-output",
        debug_hook_config={"S3OutputPath": f"s3://{bucket}/debug"},
        channels=(Channel("train", f"s3://{bucket}/data/train"), Channel("one", f"s3://{bucket}/data/one.csv")),
        hyperparameters={"sagemaker_program": '"train.py"', "mode": '"ok"', "epochs": "2",
                         "sagemaker_submit_directory": json.dumps(f"s3://{bucket}/src/sourcedir.tar.gz")},
    )
    h = rt.launch(plan)
    deadline = time.monotonic() + 60
    while (st := rt.status(h)).phase == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (st.phase, st.exit_code, st.failure) == ("exited", 0, None), st.log_tail
    body = s3.get_object(Bucket=bucket, Key="out/s3-ok/output/output.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        seen = json.loads(tar.extractfile("seen.json").read())  # type: ignore[union-attr]
    assert seen["files"] == ["a.csv", os.path.join("sub", "b.csv")] and seen["one"] == ["one.csv"]
    assert seen["hook"] == str(Path(h.data["opt_ml"]) / "input" / "config" / "debughookconfig.json")
    s3.head_object(Bucket=bucket, Key="debug/s3-ok/debug-output/training_job_end.ts")
    s3.head_object(Bucket=bucket, Key="out/s3-ok/output/model.tar.gz")
