"""The PyTorch adapter on a real small model: layout, names, steps, modes, values, reductions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from murphy.hook import ModeKeys, ReductionConfig, SaveConfig, modes
from murphy.hook.torch import Hook, get_hook, set_hook
from murphy.storage import open_store
from murphy.tensorio.index import StepIndex
from murphy.tensorio.reader import read_index, read_tensor_record


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 6)
        self.relu = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(6, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc2(self.relu(self.fc1(x)))
        return out


def read_step(out: Path, step: int) -> tuple[StepIndex, dict[str, np.ndarray]]:
    store = open_store(str(out))
    idx = read_index(store, f"index/{step // 1000:09d}/{step:012d}_worker_0.json")
    values = {e.tensorname: read_tensor_record(store, idx.event_file_name, e.start_idx, e.length).value
              for e in idx.tensors}
    return idx, values


def train(hook: Hook, schedule: list[ModeKeys]) -> tuple[dict[int, dict[str, np.ndarray]], Net]:
    torch.manual_seed(0)
    model, loss_fn = Net(), torch.nn.MSELoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    expected: dict[int, dict[str, np.ndarray]] = {}
    for step, mode in enumerate(schedule):
        hook.set_mode(mode)
        exp = {f"Net_{n}": p.detach().numpy().copy() for n, p in model.named_parameters()}
        if mode == modes.TRAIN:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            exp |= {f"gradient/Net_{n}": p.grad.numpy().copy() for n, p in model.named_parameters() if p.grad is not None}
            opt.step()
        else:
            with torch.no_grad():
                loss = loss_fn(model(x), y)
        exp["MSELoss_output_0"] = loss.detach().numpy().copy()
        expected[step] = exp
    hook.close()
    return expected, model


def test_layout_names_modes_and_values(tmp_path: Path) -> None:
    hook = Hook(out_dir=str(tmp_path), save_config=SaveConfig(save_interval=1),
                include_collections=["weights", "biases", "gradients", "losses", "relu_output"])
    schedule = [modes.TRAIN, modes.TRAIN, modes.EVAL, modes.TRAIN, modes.EVAL]
    expected, _ = train(hook, schedule)
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == sorted(
        [f"events/{s:012d}/{s:012d}_worker_0.tfevents" for s in range(5)]
        + [f"index/000000000/{s:012d}_worker_0.json" for s in range(5)]
        + ["collections/000000000/worker_0_collections.json", "training_job_end.ts"]
        # murphy's step manifest (docs/format.md), outside every prefix smdebug reads.
        + ["murphy-manifest/index/worker_0/000000000000_000000000004.seg"]
    )
    params = {"Net_fc1.weight", "Net_fc1.bias", "Net_fc2.weight", "Net_fc2.bias"}
    mode_steps = [(ModeKeys.TRAIN, 0), (ModeKeys.TRAIN, 1), (ModeKeys.EVAL, 0), (ModeKeys.TRAIN, 2), (ModeKeys.EVAL, 1)]
    for step, (mode, mode_step) in enumerate(mode_steps):
        idx, values = read_step(tmp_path, step)
        assert (idx.mode, idx.mode_step) == (mode, mode_step)
        want = params | {"MSELoss_output_0", "relu_output_0"}
        if mode == ModeKeys.TRAIN:
            want |= {"gradient/" + p for p in params}
        assert set(values) == want
        for name, exp in expected[step].items():
            np.testing.assert_array_equal(values[name], exp, err_msg=f"{name} at step {step}")
        assert values["MSELoss_output_0"].shape == ()
        assert values["relu_output_0"].shape == (8, 6)
    doc = json.loads((tmp_path / "collections/000000000/worker_0_collections.json").read_text())
    assert set(doc["collections"]) >= {"all", "default", "weights", "biases", "gradients", "losses", "relu_output"}
    assert doc["collections"]["weights"]["tensor_names"] == ["Net_fc1.weight", "Net_fc2.weight"]
    assert doc["collections"]["weights"]["include_regex"] == ["^(?!gradient).*weight"]


def test_reductions_equal_numpy_on_raw(tmp_path: Path) -> None:
    red = ReductionConfig(reductions=["min", "max", "mean", "variance", "sum"], abs_reductions=["mean"],
                          norms=["l2"], abs_norms=["l1"], save_raw_tensor=True)
    hook = Hook(out_dir=str(tmp_path), save_config=SaveConfig(save_interval=2), reduction_config=red,
                include_collections=["weights", "gradients"])
    train(hook, [modes.TRAIN] * 3)
    _, values = read_step(tmp_path, 2)
    numpy_ops = {
        "min": np.min, "max": np.max, "mean": np.mean, "sum": np.sum,
        "variance": lambda a: np.var(a, ddof=1),  # torch's var is unbiased
        "abs_mean": lambda a: np.mean(np.abs(a)),
        "l2": lambda a: np.sqrt(np.sum(a.astype(np.float64) ** 2)),
        "abs_l1": lambda a: np.sum(np.abs(a)),
    }
    for base in ("Net_fc1.weight", "gradient/Net_fc2.weight"):
        for op, fn in numpy_ops.items():
            got = values[f"smdebug/reductions/{op}/{base}"]
            assert got.shape == () and got.dtype == np.float32
            assert float(got) == pytest.approx(float(fn(values[base])), rel=1e-5, abs=1e-6), (op, base)
    idx, _ = read_step(tmp_path, 2)
    parts = [e.tensorname.split("/") for e in idx.tensors]
    order = [p[2] for p in parts if p[0] == "smdebug" and p[3:] == ["Net_fc1.weight"]]
    assert order == ["min", "max", "mean", "variance", "sum", "l2", "abs_mean", "abs_l1"]
    # losses are a scalar collection: never reduced
    assert not any(n.startswith("smdebug/") and n.endswith("MSELoss_output_0") for n in values)
    assert not (tmp_path / "index/000000000/000000000001_worker_0.json").exists()


def test_record_tensor_value_save_scalar_optimizer_and_bf16(tmp_path: Path) -> None:
    hook = Hook(out_dir=str(tmp_path), save_config=SaveConfig(save_interval=1),
                include_collections=["optimizer_variables", "custom"])
    model = Net()
    hook.register_module(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    hook.register_optimizer(opt)
    x = torch.randn(8, 4)
    for _ in range(2):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        hook.record_tensor_value("my_loss", loss)
        hook.save_scalar("lr", 0.01)
        hook.save_tensor("half", torch.ones(3, dtype=torch.bfloat16) * 1.5, "custom")
        loss.backward()
        opt.step()
    hook.close()
    _, values = read_step(tmp_path, 1)
    assert float(values["my_loss_output_0"]) == pytest.approx(0.0, abs=10) and values["my_loss_output_0"].shape == ()
    np.testing.assert_array_equal(values["scalar/lr"], np.array([0.01]))
    np.testing.assert_array_equal(values["half"], np.full(3, 1.5, dtype=np.float32))
    exp_avg = opt.state[next(iter(model.parameters()))]["exp_avg"]
    assert "Adam_0_exp_avg" in values and values["Adam_0_exp_avg"].shape == tuple(exp_avg.shape)
    _, first = read_step(tmp_path, 0)
    assert not any(n.startswith("Adam_") for n in first)  # no state before the first update


def test_module_outputs_and_inputs_by_regex(tmp_path: Path) -> None:
    hook = Hook(out_dir=str(tmp_path), save_config=SaveConfig(save_interval=1), include_regex=["fc1_input", "Net_output"])
    model = Net()
    hook.register_hook(model)
    x = torch.randn(5, 4)
    out = model(x)
    hook.close()
    _, values = read_step(tmp_path, 0)
    assert set(values) == {"fc1_input_0", "Net_output_0"}
    np.testing.assert_array_equal(values["fc1_input_0"], x.numpy())
    np.testing.assert_array_equal(values["Net_output_0"], out.detach().numpy())


def test_create_from_json_file_and_get_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "tensors"
    cfg: dict[str, Any] = {
        "LocalPath": str(out),
        "HookParameters": {"save_interval": "2", "reductions": "max", "save_raw_tensor": "true"},
        "CollectionConfigurations": [
            {"CollectionName": "weights", "CollectionParameters": {"save_interval": "1"}},
            {"CollectionName": "gradients", "CollectionParameters": {"reductions": "abs_mean"}},
        ],
    }
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(cfg))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(path))
    set_hook(None)
    assert get_hook() is None
    hook = get_hook(create_if_not_exists=True)
    assert isinstance(hook, Hook) and get_hook() is hook
    set_hook(None)
    train(hook, [modes.TRAIN] * 2)
    _, s0 = read_step(out, 0)
    _, s1 = read_step(out, 1)
    assert "smdebug/reductions/abs_mean/gradient/Net_fc1.weight" in s0
    assert "gradient/Net_fc1.weight" not in s0  # the collection's own reduction config
    assert "smdebug/reductions/max/Net_fc1.weight" in s0 and "Net_fc1.weight" in s0
    assert {n for n in s1 if not n.startswith("smdebug/")} == {"Net_fc1.weight", "Net_fc2.weight"}


def test_import_murphy_hook_does_not_import_torch() -> None:
    code = "import sys, murphy.hook; assert 'torch' not in sys.modules; murphy.hook.torch; assert 'torch' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_json_config_tensorboard_dir_reaches_the_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", str(tmp_path / "absent.json"))
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps({"LocalPath": str(tmp_path / "tensors"),
                                "HookParameters": {"tensorboard_dir": str(tmp_path / "tb")}}))
    hook = Hook.create_from_json_file(path)
    assert hook._writer.tensorboard is not None and hook._writer.tensorboard.logdir == str(tmp_path / "tb")
    hook.close()


@pytest.mark.parametrize(("env", "worker", "workers"), [
    ({"RANK": "1", "WORLD_SIZE": "2"}, "worker_1", 2),  # torchrun's variables, before init_process_group
    ({"RANK": "5", "WORLD_SIZE": "2"}, "worker_0", 1),  # nonsense: one worker
    ({}, "worker_0", 1),
])
def test_the_worker_is_named_from_torchruns_rank_before_the_process_group_exists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], worker: str, workers: int) -> None:
    for key in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    hook = Hook(out_dir=str(tmp_path / "out"), include_workers="all")
    assert (hook.worker, hook.num_workers) == (worker, workers)
