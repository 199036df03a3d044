"""The container contract both real runtimes keep, each test run on ProcessRuntime and on
DockerRuntime: the demo image, script mode, rules, stop, re-attach, vanished containers.

Buckets are local directories. Where the runtimes legitimately differ (paths inside the
container, images and labels, how a container vanishes and what is left of it), the
per-runtime adapter in runtime_support.py says so. The docker cases need dockerd and
`make images-cpu` (the ``docker_engine`` fixture skips without them locally and fails in CI).
"""

from __future__ import annotations

import json
import signal
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from runtime_support import DEMO, RULES, DockerEnv, ProcessEnv, RuntimeEnv

from murphy.runtimes.base import Channel, ContainerState, Handle, RulePlan, TrainingPlan

Demo = tuple[TrainingPlan, Handle, ContainerState]


@pytest.fixture(scope="module", params=["process", pytest.param("docker", marks=pytest.mark.docker)])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RuntimeEnv]:
    root = tmp_path_factory.mktemp(f"{request.param}-runtime")
    e: RuntimeEnv
    if request.param == "docker":
        e = DockerEnv(root, request.getfixturevalue("docker_engine"))
    else:
        e = ProcessEnv(root)
    yield e
    e.close()


# ---- the demo image, its tensors and a rule on them ------------------------------------------


@pytest.fixture(scope="module")
def demo(env: RuntimeEnv) -> Demo:
    plan = TrainingPlan(
        container_name="demo-training", job_name="demo", image=DEMO,
        hyperparameters={"lr": "100", "scale": "100000000000", "steps": "10", "debug_frequency": "1"},
        environment={}, instance_type="ml.m5.xlarge", instance_count=1,
        debug_hook_config={"S3OutputPath": "s3://b/debug", "CollectionConfigurations": []},
        tensor_uri="s3://b/debug/demo/debug-output", output_uri="s3://b/out/demo/output",
    )
    h = env.launch(plan)
    return plan, h, env.wait(h)


def test_demo_trains_in_its_image_and_its_tensors_and_model_are_uploaded(env: RuntimeEnv, demo: Demo) -> None:
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
    config = Path(h.data["opt_ml"]) / "input" / "config"  # the host's side of /opt/ml
    assert json.loads((config / "hyperparameters.json").read_text()) == plan.hyperparameters
    assert json.loads((config / "resourceconfig.json").read_text())["hosts"] == ["algo-1"]
    hook = json.loads((config / "debughookconfig.json").read_text())
    assert hook["LocalPath"] == env.in_opt_ml(h, "output", "tensors")  # as the program sees it
    assert hook["S3OutputPath"] == "s3://b/debug"
    env.check_container(h, image=DEMO, job="demo")


def test_launching_twice_gives_one_container(env: RuntimeEnv, demo: Demo) -> None:
    plan, h, _ = demo
    assert env.rt.launch(plan) == h
    assert env.runtime().launch(plan) == h  # another instance (a restarted service) too


def test_rule_evaluator_finds_the_exploding_tensor(env: RuntimeEnv, demo: Demo) -> None:
    plan = RulePlan(container_name="demo-rule-0", job_name="demo", rule_name="ExplodingTensor", image=RULES,
                    rule_parameters={"rule_to_invoke": "ExplodingTensor"},
                    base_trial_uri="s3://b/debug/demo/debug-output", result_uri="s3://b/rules/demo/0",
                    environment={"MURPHY_POLL_INTERVAL": "0.05"})
    h = env.launch(plan)
    st = env.wait(h)
    assert (st.phase, st.exit_code, st.failure) == ("exited", 0, None), st.log_tail
    result = json.loads(env.bucket("rules/demo/0/result.json").read_text())
    assert (result["status"], result["step"], result["tensor"]) == ("IssuesFound", 2, "LinearRegression_weight")
    assert result["training_job_name"] == "demo" and result["rule_name"] == "ExplodingTensor"
    env.check_container(h, image="murphy/rule-evaluator:latest", job="demo")  # what the catalog maps RULES to


# ---- script mode -----------------------------------------------------------------------------


def test_script_mode_runs_the_entry_point_with_channels_and_hyperparameters(env: RuntimeEnv) -> None:
    plan = env.script_plan("sm-ok", "ok", channels=(Channel("train", "s3://b/data/train"),
                                                    Channel("one", "s3://b/data/one.csv")))
    h = env.launch(plan)
    st = env.wait(h)
    assert (st.phase, st.exit_code, st.failure) == ("exited", 0, None), st.log_tail
    argv = 'argv ["--epochs", "2", "--mode", "ok"]'
    assert argv in [e.message for e in env.rt.read_logs(h).events]
    with tarfile.open(env.bucket("out/sm-ok/output/output.tar.gz")) as tar:
        seen = json.loads(tar.extractfile("seen.json").read())  # type: ignore[union-attr]
    assert seen == {"files": ["a.csv", "sub/b.csv"], "one": ["one.csv"], "cwd": env.in_opt_ml(h, "code"),
                    "job": "sm-ok", "epochs": "2", "hook": None}
    with tarfile.open(env.bucket("out/sm-ok/output/model.tar.gz")) as tar:
        assert tar.extractfile("model.bin").read() == b"weights"  # type: ignore[union-attr]
    env.rt.remove(h)
    opt_ml = Path(h.data["opt_ml"])
    assert not (opt_ml / "input" / "data").exists() and not (opt_ml / "code").exists()
    st = env.rt.status(h)
    assert (st.phase, st.exit_code) == env.after_remove
    assert argv in [e.message for e in env.rt.read_logs(h).events]  # the log is kept


def test_failure_file_becomes_the_failure(env: RuntimeEnv) -> None:
    st = env.wait(env.launch(env.script_plan("sm-fail", "fail")))
    assert (st.phase, st.exit_code, st.failure) == ("exited", 3, "ValueError: learning rate too high")


def test_toolkit_errors_are_failures_too(env: RuntimeEnv) -> None:
    st = env.wait(env.launch(env.script_plan("sm-nodata", "ok", channels=(Channel("train", "s3://b/no/such/prefix"),))))
    assert (st.phase, st.exit_code) == ("exited", 1)
    assert st.failure is not None and "channel 'train'" in st.failure and "s3://b/no/such/prefix" in st.failure


# ---- stop, re-attach, containers that vanish behind the runtime's back ------------------------


def test_sigterm_stops_a_program_and_training_end_is_still_marked(env: RuntimeEnv) -> None:
    plan = env.script_plan("sm-term", "sleep", tensor_uri="s3://b/debug/sm-term/debug-output",
                           debug_hook_config={"S3OutputPath": "s3://b/debug"})
    h = env.launch(plan)
    env.wait_log(h, "ready")
    assert env.rt.status(h).phase == "running" and env.rt.status(h).stage == "Training"
    env.rt.stop(h)
    st = env.wait(h, timeout=30)
    assert (st.phase, st.exit_code) == ("exited", 128 + signal.SIGTERM)
    assert env.bucket("debug/sm-term/debug-output/training_job_end.ts").exists()
    assert env.gone(h)


def test_a_program_that_ignores_sigterm_is_killed_by_force(env: RuntimeEnv) -> None:
    h = env.launch(env.script_plan("sm-ignore", "ignore-term"))
    env.wait_log(h, "ready")
    env.rt.stop(h)
    time.sleep(1.0)
    # The toolkit forwards SIGTERM and waits: the program ignoring it keeps the container up.
    assert env.rt.status(h).phase == "running"
    env.rt.stop(h, force=True)
    st = env.rt.status(h)
    assert (st.phase, st.exit_code) == ("exited", 128 + signal.SIGKILL)
    assert st.failure is not None and "SIGKILL" in st.failure
    assert env.leftovers(h) == []
    env.rt.stop(h, force=True)  # stopping an exited container is a no-op


def test_a_new_runtime_instance_reattaches_and_sees_the_end(env: RuntimeEnv) -> None:
    h = env.launch(env.script_plan("sm-reattach", "sleep", environment={"SLEEP_S": "2"}))
    env.wait_log(h, "ready")
    other = env.runtime()
    restored = Handle(**json.loads(json.dumps(h.__dict__)))  # as the job store gives it back
    assert other.status(restored).phase == "running"
    st = env.wait(restored, rt=other, timeout=60)
    assert (st.phase, st.exit_code) == ("exited", 0)
    messages = [e.message for e in other.read_logs(restored).events]
    assert messages.index("ready") < messages.index("done")


def test_container_vanished_behind_the_runtimes_back_is_missing(env: RuntimeEnv) -> None:
    h = env.launch(env.script_plan("sm-vanish", "sleep"))
    env.wait_log(h, "ready")
    env.vanish(h)  # process: its group killed; docker: the container removed
    deadline = time.monotonic() + env.vanish_noticed_within
    while (st := env.rt.status(h)).phase == "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert st.phase == "missing" and st.failure is not None and "vanished" in st.failure
    assert "ready" in st.log_tail  # what was logged before it vanished
    assert env.leftovers(h) == env.survivors_of_vanish
    env.rt.stop(h, force=True)  # no error for a vanished container; it ends what is left
    assert env.leftovers(h) == [] and env.rt.status(h).phase == env.phase_after_stopping_vanished


# ---- labels: what the backend itself says is running (issue 14's reconciler) -----------------


def test_containers_are_listed_by_their_labels_from_the_backend(env: RuntimeEnv, tmp_path: Path) -> None:
    h = env.launch(env.script_plan("sm-listed", "sleep", job_name="listed-job"))
    env.wait_log(h, "ready")
    found = env.runtime().list_containers("listed-job")  # a new instance: the backend answers, not state
    assert [(c.container_name, c.job_name, c.role, c.phase, c.handle.id) for c in found] == [
        ("sm-listed", "listed-job", "training", "running", h.id)]
    assert "sm-listed" in [c.container_name for c in env.rt.list_containers()]
    assert env.rt.list_containers("no-such-job") == []
    elsewhere = type(env)(tmp_path, *([env.client] if isinstance(env, DockerEnv) else []))
    try:  # another installation (another runtime id) on the same host sees none of it
        assert elsewhere.rt.list_containers() == []
    finally:
        elsewhere.close()
    env.rt.stop(found[0].handle, force=True)  # the listed handle works as launch's does
    assert env.gone(h)
    assert [c for c in env.rt.list_containers("listed-job") if c.live] == []
