"""The data plane end to end: murphy's PyTorch hook writes, murphy's trial reads, on a local
directory and straight to a real S3 server (SeaweedFS), finished and live."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import servers
from murphy.hook import ReductionConfig, SaveConfig, modes
from murphy.hook.torch import Hook
from murphy.trial import create_trial


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.relu = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


def _train(out_dir: str, steps: int, eval_every: int = 0, pause: float = 0.0) -> dict[int, dict[str, np.ndarray]]:
    """Train and return what the hook should have saved, keyed by global step."""
    torch.manual_seed(0)
    net, loss_fn = Net(), torch.nn.MSELoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    hook = Hook(
        out_dir=out_dir,
        save_config=SaveConfig(save_interval=1),
        reduction_config=ReductionConfig(reductions=["max"], norms=["l2"], save_raw_tensor=True),
        include_collections=["weights", "gradients", "losses"],
    )
    hook.register_module(net)
    hook.register_loss(loss_fn)
    hook.set_mode(modes.TRAIN)
    expected: dict[int, dict[str, np.ndarray]] = {}
    step = 0
    for i in range(steps):
        x, y = torch.randn(16, 4), torch.randn(16, 1)
        if eval_every and i % eval_every == eval_every - 1:
            hook.set_mode(modes.EVAL)
            with torch.no_grad():
                loss_fn(net(x), y)
            hook.set_mode(modes.TRAIN)
            step += 1
        expected[step] = {"Net_fc1.weight": net.fc1.weight.detach().numpy().copy()}
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        expected[step]["gradient/Net_fc1.weight"] = net.fc1.weight.grad.numpy().copy()
        expected[step]["MSELoss_output_0"] = loss.detach().numpy().copy()
        opt.step()
        step += 1
        if pause:
            time.sleep(pause)
    hook.close()
    return expected


def _check(trial_path: str, expected: dict[int, dict[str, np.ndarray]]) -> None:
    trial = create_trial(trial_path)
    assert trial.training_has_ended()
    for step, tensors in expected.items():
        for name, value in tensors.items():
            np.testing.assert_array_equal(trial.tensor(name).value(step), value)
    w = trial.tensor("Net_fc1.weight")
    some = next(iter(expected))
    assert w.reduction_value(some, "l2") == pytest.approx(np.linalg.norm(expected[some]["Net_fc1.weight"]), rel=1e-5)
    assert set(trial.tensor_names(collection="gradients")) == {
        "gradient/Net_fc1.weight", "gradient/Net_fc1.bias", "gradient/Net_fc2.weight", "gradient/Net_fc2.bias",
    }


def test_local_directory_with_train_and_eval_modes(tmp_path: Path) -> None:
    expected = _train(str(tmp_path / "run"), steps=9, eval_every=3)
    _check(str(tmp_path / "run"), expected)
    trial = create_trial(str(tmp_path / "run"))
    # 9 train steps plus an eval forward after every third: global steps 0..11.
    assert trial.steps() == list(range(12))
    assert trial.steps(mode=modes.EVAL) == [0, 1, 2]
    assert trial.global_step(modes.EVAL, 0) == 2
    assert trial.mode(6) == modes.EVAL and trial.mode_step(6) == 1
    assert trial.mode(7) == modes.TRAIN and trial.mode_step(7) == 5
    assert trial.steps(mode=modes.TRAIN) == list(range(9))


def test_hook_writes_straight_to_s3(seaweedfs_server: servers.S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in seaweedfs_server.env().items():
        monkeypatch.setenv(k, v)
    bucket = servers.new_bucket(seaweedfs_server)
    uri = f"s3://{bucket}/jobs/run-1/debug-output"
    expected = _train(uri, steps=5)
    keys = [o["Key"] for o in seaweedfs_server.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert "jobs/run-1/debug-output/training_job_end.ts" in keys
    assert "jobs/run-1/debug-output/index/000000000/000000000004_worker_0.json" in keys
    _check(uri, expected)


def test_trial_sees_steps_while_training_runs(tmp_path: Path) -> None:
    out = str(tmp_path / "live")
    done = threading.Event()

    def run() -> None:
        try:
            _train(out, steps=40, pause=0.05)
        finally:
            done.set()

    t = threading.Thread(target=run)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "live" / "collections").exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        trial = create_trial(out, poll_interval=0.05)
        live: list[list[int]] = []
        while not done.is_set():
            steps = trial.steps()
            # Read before the end marker existed: training was still writing then. (Counting
            # steps seen before the thread finished raced with the last step, which a fresh
            # reader sees between hook.close() and the thread's end.)
            if not trial.training_has_ended():
                live.append(steps)
            time.sleep(0.05)
        assert any(live) and min(s for view in live for s in view) < 39
        trial.wait_for_steps([39])
        assert trial.steps()[-1] == 39
    finally:
        t.join()
