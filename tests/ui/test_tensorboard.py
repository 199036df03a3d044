"""TensorBoard output, read back with TensorBoard's own reader (the ``tensorboard`` package in
the browser venv): the PyTorch hook's summaries, ``murphy tensorboard export``, and
``TensorBoardOutputConfig`` jobs on the process and Docker runtimes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from murphy.core.collection import Collection, CollectionsDoc
from murphy.core.modes import ModeKeys
from murphy.storage import LocalObjectStore
from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training

READER = Path(__file__).with_name("tb_read.py")


@pytest.fixture(scope="module")
def tb_python(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("browser_python"))


def read(python: str, logdir: Path) -> dict[str, Any]:
    out = subprocess.run([python, str(READER), str(logdir)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout))


def test_the_pytorch_hook_writes_scalars_and_histograms_per_collection(tb_python: str, tmp_path: Path) -> None:
    script = f"""
from murphy.demos import linear_regression as lr
from murphy.hook import SaveConfig
from murphy.hook.torch import Hook
hook = Hook(out_dir={str(tmp_path / "tensors")!r}, tensorboard_dir={str(tmp_path / "tb")!r},
            save_config=SaveConfig(save_interval=1), include_collections=["weights", "gradients", "losses"])
lr.train(None, 100.0, 1e11, 5, 1, hook=hook)
"""
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=120)
    runs = read(tb_python, tmp_path / "tb")
    assert list(runs) == ["GLOBAL"]
    run = runs["GLOBAL"]
    loss = run["scalars"]["losses/MSELoss_output_0"]
    assert [s for s, _ in loss] == [0, 1, 2, 3, 4]
    assert 1e23 < loss[0][1] < 1e25 and loss[2][1] == "NaN"
    # Histograms hold only finite values: the weight's exist for steps 0-1, its NaNs are counts.
    assert [h[0] for h in run["histograms"]["weights/LinearRegression_weight"]] == [0, 1]
    assert run["histograms"]["weights/LinearRegression_weight"][0][1:] == [2.0, 10.0, 10.0, 2.0]
    assert "gradients/gradient/LinearRegression_weight" in run["histograms"]
    assert run["scalars"]["nonfinite/LinearRegression_weight/nan_count"] == [[2, 2.0], [3, 2.0], [4, 2.0]]


def _collections(store: LocalObjectStore) -> None:
    doc = CollectionsDoc({"losses": Collection("losses", tensor_names={"loss"}),
                          "weights": Collection("weights", tensor_names={"w"})}, num_workers=1)
    write_collections(store, doc, "worker_0")


def _step(store: LocalObjectStore, n: int, mode: ModeKeys) -> None:
    with StepWriter(store, n, "worker_0", mode, n) as w:
        w.add("loss", np.asarray(1.0 / (n + 1), dtype=np.float32))
        w.add("w", np.arange(6, dtype=np.float32) * n)


def test_export_is_incremental_with_one_run_per_mode(tb_python: str, tmp_path: Path) -> None:
    trial, logdir = tmp_path / "trial", tmp_path / "tb"
    store = LocalObjectStore(str(trial))
    _collections(store)
    for n in range(4):
        _step(store, n, ModeKeys.TRAIN if n % 2 == 0 else ModeKeys.EVAL)
    murphy = [sys.executable, "-m", "murphy.cli", "tensorboard", "export", str(trial), str(logdir)]
    first = subprocess.run(murphy, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and "4 new step(s)" in first.stdout, first.stdout + first.stderr
    for n in range(4, 6):
        _step(store, n, ModeKeys.TRAIN)
    write_end_of_training(store)
    second = subprocess.run(murphy, capture_output=True, text=True, timeout=120)
    assert "2 new step(s)" in second.stdout, second.stdout + second.stderr
    runs = read(tb_python, logdir)
    assert sorted(runs) == ["EVAL", "TRAIN"]
    assert [s for s, _ in runs["TRAIN"]["scalars"]["losses/loss"]] == [0, 2, 4, 5]  # no step twice
    assert [s for s, _ in runs["EVAL"]["scalars"]["losses/loss"]] == [1, 3]
    assert runs["TRAIN"]["histograms"]["weights/w"][-1][1:] == [6.0, 0.0, 25.0, 6.0]
    assert len(list((logdir / "TRAIN").glob("*tfevents*"))) == 2


# A trial written by the REAL smdebug 1.0.34 PyTorch hook (run in the smdebug venv).
SMDEBUG_WRITER = """
import sys
import torch
import smdebug.pytorch as smd
torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
hook = smd.Hook(out_dir=sys.argv[1], save_config=smd.SaveConfig(save_interval=1),
                include_collections=["weights", "losses"])
hook.register_module(model)
loss_fn = torch.nn.MSELoss()
hook.register_loss(loss_fn)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.arange(12.0).reshape(4, 3) / 10, torch.ones(4, 1)
hook.set_mode(smd.modes.TRAIN)
for _ in range(3):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
hook.set_mode(smd.modes.EVAL)
with torch.no_grad():
    for _ in range(2):
        loss_fn(model(x), y)
hook.close()
"""


@pytest.mark.compat
def test_export_of_an_smdebug_trial_on_s3(tb_python: str, request: pytest.FixtureRequest, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``murphy tensorboard export s3://...`` of what smdebug itself wrote: one run per mode, the
    values smdebug saved (read back by murphy.trial from the same URI)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
    import compat_harness

    import servers
    from murphy.trial import create_trial

    s3 = request.getfixturevalue("seaweedfs_server")
    uri = f"s3://{servers.new_bucket(s3, prefix='tbexport')}/smdebug-run"
    env = compat_harness.clean_env(s3.env())
    proc = subprocess.run([compat_harness.ensure_smdebug_venv(), "-c", SMDEBUG_WRITER, uri], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = subprocess.run([sys.executable, "-m", "murphy.cli", "tensorboard", "export", uri, str(tmp_path / "tb")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "5 new step(s)" in out.stdout, out.stdout + out.stderr
    runs = read(tb_python, tmp_path / "tb")
    assert sorted(runs) == ["EVAL", "TRAIN"]
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)  # this process reads the same URI
    trial = create_trial(uri)
    loss = trial.tensor_names(collection="losses")[0]
    for run, mode in (("TRAIN", ModeKeys.TRAIN), ("EVAL", ModeKeys.EVAL)):
        t = trial.tensor(loss)
        want = [[trial.global_step(mode, s), float(t.value(s, mode=mode))] for s in t.steps(mode=mode)]
        got = runs[run]["scalars"][f"losses/{loss}"]
        assert [p[0] for p in got] == [p[0] for p in want] and np.allclose([p[1] for p in got], [p[1] for p in want])
    weight = next(n for n in trial.tensor_names(collection="weights") if n.endswith("weight"))
    assert [h[0] for h in runs["TRAIN"]["histograms"][f"weights/{weight}"]] == [0, 1, 2]


@pytest.mark.slow
def test_tensorboard_output_config_end_to_end(tb_python: str, request: pytest.FixtureRequest, make_server: Any,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A job with TensorBoardOutputConfig: the hook writes LocalPath, the container uploads it
    to <S3OutputPath>/<job>/tensorboard-output (here the server's local buckets)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
    from test_control_plane import EXPLODING, job_request, start_plane, watch

    server = start_plane(request, make_server, monkeypatch, "process", "local")
    client = server.client()
    body = job_request("seed-tb", "murphy-e2e", EXPLODING,
                       TensorBoardOutputConfig={"S3OutputPath": "s3://murphy-e2e/tb"})
    client.create_training_job(**body)
    job, _ = watch(client, "seed-tb")
    assert job["TrainingJobStatus"] == "Stopped" and job["TensorBoardOutputConfig"]["S3OutputPath"] == "s3://murphy-e2e/tb"
    logdir = server.data_dir / "buckets" / "murphy-e2e" / "tb" / "seed-tb" / "tensorboard-output"
    runs = read(tb_python, logdir)
    assert list(runs) == ["GLOBAL"], (runs, server.log()[-3000:])
    loss = runs["GLOBAL"]["scalars"]["losses/MSELoss_output_0"]
    assert loss[0][0] == 0 and loss[2] == [2, "NaN"]
    assert "weights/LinearRegression_weight" in runs["GLOBAL"]["histograms"]


# The demo slowed to ~4 steps a second, so the upload is seen while the job runs.
SLOW_TB_DEMO = """
import time
from murphy.demos import linear_regression as lr
forward = lr.LinearRegression.forward
def slow(self, x):
    time.sleep(0.25)
    return forward(self, x)
lr.LinearRegression.forward = slow
lr.main(["--lr", "0.001", "--scale", "1", "--steps", "%d", "--debug_frequency", "1"])
"""
SLOW_STEPS = 40


def _snapshot(store: Any, dest: Path) -> int:
    """Copy every object of ``store`` (a TensorBoard logdir) to ``dest``; how many."""
    n = 0
    for key in store.list():
        path = dest / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(store.get(key))
        n += 1
    return n


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.parametrize("store", ["local", "s3"])
def test_tensorboard_output_config_on_docker_uploads_while_running(
        tb_python: str, request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, store: str) -> None:
    """A Docker job with TensorBoardOutputConfig: its TensorBoard files are at
    <S3OutputPath>/<job>/tensorboard-output while it trains, and complete at the end."""
    request.getfixturevalue("docker_engine")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
    from test_control_plane import job_request, put_object, start_plane, watch

    from murphy.storage import open_store
    from sourcetar import train_py_tarball

    server = start_plane(request, make_server, monkeypatch, "docker", store)
    client, bucket = server.client(), server.extra["bucket"]
    put_object(server, "src/slow-tb.tar.gz", train_py_tarball(SLOW_TB_DEMO % SLOW_STEPS))
    body = job_request("tb-docker", bucket, {
        "sagemaker_program": '"train.py"', "sagemaker_submit_directory": f'"s3://{bucket}/src/slow-tb.tar.gz"'},
        TensorBoardOutputConfig={"S3OutputPath": f"s3://{bucket}/tb"})
    body["AlgorithmSpecification"]["TrainingImage"] = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
    body.pop("DebugRuleConfigurations")
    client.create_training_job(**body)
    logdir = open_store(f"s3://{bucket}/tb/tb-docker/tensorboard-output")

    # While it runs: a copy taken while the job is still InProgress holds some steps, not all.
    live: dict[str, Any] | None = None
    deadline = time.monotonic() + 240
    for attempt in range(10_000):
        assert time.monotonic() < deadline, ("no TensorBoard upload seen while the job ran", server.log()[-3000:])
        snap = tmp_path / f"live-{attempt}"
        copied = _snapshot(logdir, snap)
        status = client.describe_training_job(TrainingJobName="tb-docker")["TrainingJobStatus"]
        assert status == "InProgress", ("the job ended before any TensorBoard file was uploaded", server.log()[-3000:])
        if copied:
            runs = read(tb_python, snap)
            if len(runs.get("GLOBAL", {}).get("scalars", {}).get("losses/MSELoss_output_0", [])) >= 2:
                live = runs
                break
        time.sleep(0.5)
    assert live is not None
    seen = [s for s, _ in live["GLOBAL"]["scalars"]["losses/MSELoss_output_0"]]
    assert seen == list(range(len(seen))) and len(seen) < SLOW_STEPS, seen

    job, _ = watch(client, "tb-docker", timeout=240)
    assert job["TrainingJobStatus"] == "Completed", (job.get("FailureReason"), server.log()[-3000:])
    assert _snapshot(logdir, tmp_path / "final")
    final = read(tb_python, tmp_path / "final")
    assert list(final) == ["GLOBAL"]
    loss = final["GLOBAL"]["scalars"]["losses/MSELoss_output_0"]
    assert [s for s, _ in loss] == list(range(SLOW_STEPS))  # the final pass brought the last steps
    assert [h[0] for h in final["GLOBAL"]["histograms"]["weights/LinearRegression_weight"]] == list(range(SLOW_STEPS))
