"""The hook's fast paths give the same results as the full rules: next-due-step skipping,
callbacks installed only on saving steps, one copy per activation per step."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from save_spy import spy_full_path

from murphy.hook import ModeKeys, ReductionConfig, SaveConfig, SaveConfigMode
from murphy.hook.base import BaseHook
from murphy.hook.collections import next_save_step
from murphy.hook.torch import Hook
from murphy.storage import open_store
from murphy.storage.memory import InMemoryObjectStore
from murphy.tensorio.index import StepIndex
from murphy.tensorio.reader import read_index, read_tensor_record


def read_step(out: Path, step: int) -> tuple[StepIndex, dict[str, np.ndarray]]:
    store = open_store(str(out))
    idx = read_index(store, f"index/{step // 1000:09d}/{step:012d}_worker_0.json")
    values = {e.tensorname: read_tensor_record(store, idx.event_file_name, e.start_idx, e.length).value
              for e in idx.tensors}
    return idx, values

mode_configs = st.builds(
    SaveConfigMode,
    save_interval=st.integers(1, 12),
    start_step=st.integers(-3, 20),
    end_step=st.none() | st.integers(0, 40),
    save_steps=st.lists(st.integers(0, 40), max_size=4),
)
save_configs = st.dictionaries(st.sampled_from(list(ModeKeys)), mode_configs, max_size=4).map(
    lambda d: SaveConfig(mode_save_configs=d) if d else SaveConfig(save_interval=7)
)


@given(mode_configs, st.integers(0, 60))
def test_next_save_step_is_the_first_step_the_rule_accepts(cfg: SaveConfigMode, step: int) -> None:
    horizon = step + 100 + cfg.save_interval
    expected = next((s for s in range(step, horizon) if cfg.should_save_step(s)), None)
    assert next_save_step(cfg, step) == expected


@settings(max_examples=60, deadline=None)
@given(
    save_configs,
    st.dictionaries(st.sampled_from(["weights", "gradients", "biases", "custom"]), save_configs, max_size=3),
    st.lists(st.sampled_from(list(ModeKeys)), min_size=1, max_size=60),
)
def test_skipping_steps_gives_the_full_rules_decisions(
    hook_cfg: SaveConfig, coll_cfgs: dict[str, SaveConfig], schedule: list[ModeKeys]
) -> None:
    hook = BaseHook(InMemoryObjectStore(), dry_run=True, save_config=hook_cfg,
                    include_collections=["losses", *coll_cfgs])
    for name, cfg in coll_cfgs.items():
        hook.get_collection(name).save_config = cfg
    counts = dict.fromkeys(ModeKeys, -1)
    for i, mode in enumerate(schedule):
        if i == len(schedule) // 2 and coll_cfgs:
            # A change between steps must be seen at the next step.
            hook.get_collection(next(iter(coll_cfgs))).save_config = SaveConfig(save_interval=3)
        hook.set_mode(mode)
        hook._begin_step()
        counts[mode] += 1
        # Each mode's counter (kept in _mode_step while the mode stays: folded on a change).
        assert hook.mode_step == counts[mode] and hook.mode_steps == counts, (i, mode)
        assert hook._due == hook.collections.due(mode, hook.mode_step), (i, mode)
        assert hook._saving == bool(hook._due)
    hook.close()


@settings(max_examples=60, deadline=None)
@given(
    save_configs,
    st.dictionaries(st.sampled_from(["weights", "gradients", "biases", "custom"]), save_configs, max_size=3),
    st.sampled_from(list(ModeKeys)),
    st.integers(0, 60),
)
def test_a_steps_schedule_is_its_due_collections_and_the_next_due_step(
    hook_cfg: SaveConfig, coll_cfgs: dict[str, SaveConfig], mode: ModeKeys, step: int
) -> None:
    hook = BaseHook(InMemoryObjectStore(), dry_run=True, save_config=hook_cfg,
                    include_collections=["losses", *coll_cfgs])
    for name, cfg in coll_cfgs.items():
        hook.get_collection(name).save_config = cfg
    colls = hook.collections
    assert colls.schedule(mode, step) == (colls.due(mode, step), colls.next_due(mode, step + 1))
    # Past every start, end and listed step, one full period of the widest interval (500) is enough.
    expected = next((s for s in range(step + 1, step + 1100) if colls.due(mode, s)), None)
    assert colls.next_due(mode, step + 1) == expected
    hook.close()


class Net(torch.nn.Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 6)
        self.relu = torch.nn.ReLU(inplace=inplace)
        self.fc2 = torch.nn.Linear(6, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc2(self.relu(self.fc1(x)))
        return out


def _step(model: Net, loss_fn: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    opt.zero_grad()
    loss_fn(model(x), torch.zeros(len(x), 1)).backward()
    opt.step()


def _setup(hook: Hook, inplace: bool = False) -> tuple[Net, torch.nn.Module, torch.optim.Optimizer, torch.Tensor]:
    torch.manual_seed(0)
    model, loss_fn = Net(inplace), torch.nn.MSELoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    return model, loss_fn, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(8, 4)


def test_callbacks_exist_only_on_saving_steps(tmp_path: Path) -> None:
    hook = Hook(out_dir=tmp_path / "run", save_config=SaveConfig(save_steps=[0, 3]),
                include_collections=["weights", "gradients", "losses"], include_regex=["fc1_output_0"])
    model, loss_fn, opt, x = _setup(hook)
    counts, residue = [], []
    for _ in range(5):
        _step(model, loss_fn, opt, x)
        counts.append((len(model.fc1._forward_hooks), len(loss_fn._forward_hooks),
                       len(model.fc1.weight._backward_hooks or {})))
        residue.append([p._backward_hooks is None for p in model.parameters()])
    hook.close()
    assert counts[0] == counts[3] and counts[0][:2] == (1, 1) and counts[0][2] >= 1
    assert counts[1] == counts[2] == counts[4] == (0, 0, 0)
    # Not even an empty hook dict is left: torch would call back into Python for it in every
    # backward.
    assert all(all(r) for r in (residue[1], residue[2], residue[4]))
    assert all(len(m._forward_pre_hooks) == (1 if m is model else 0) for m in model.modules())
    assert set(read_step(tmp_path / "run", 3)[1]) >= {"Net_fc1.weight", "gradient/Net_fc1.weight",
                                                      "fc1_output_0", "MSELoss_output_0"}


def test_forward_hooks_stay_only_where_a_name_can_be_saved(tmp_path: Path) -> None:
    class Branchy(Net):
        def __init__(self) -> None:
            super().__init__()
            self.extra = torch.nn.Linear(6, 6)
            self.calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            h = self.relu(self.fc1(x))
            if self.calls % 4 == 0:  # not called in the learning step
                h = self.extra(h)
            out: torch.Tensor = self.fc2(h)
            return out

    hook = Hook(out_dir=tmp_path / "run", save_config=SaveConfig(save_interval=1),
                include_collections=["weights", "gradients"])
    torch.manual_seed(0)
    model, loss_fn = Branchy(), torch.nn.MSELoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt, x = torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(8, 4)
    hooked = []
    for step in range(7):
        if step == 5:  # a new collection: learned again, and the ReLU is hooked for its output
            hook.get_collection("custom").include("relu_output")
            hook.get_collection("custom").save_config = SaveConfig(save_interval=1)
            hook.collections.include(["custom"])
        _step(model, loss_fn, opt, x)
        hooked.append({n for n, m in [*model.named_modules(), ("loss", loss_fn)] if m._forward_hooks})
    hook.close()
    every = {"", "fc1", "relu", "fc2", "extra", "loss"}
    assert hooked[0] == every  # the learning step
    # Learned: the loss (the default "losses" collection), the module the learning step did not
    # call, and the root (its forward's end hands the copies over).
    assert hooked[1] == hooked[2] == hooked[4] == {"loss", "extra", ""}
    assert hooked[5] == every and hooked[6] >= {"relu", ""} and "fc1" not in hooked[6]
    for step in range(5):
        used = [p for p, _ in model.named_parameters() if step == 3 or not p.startswith("extra.")]
        assert {n for n in read_step(tmp_path / "run", step)[1] if not n.startswith("Branchy_")} == {
            f"gradient/Branchy_{p}" for p in used} | {"MSELoss_output_0"}
    assert "relu_output_0" in read_step(tmp_path / "run", 6)[1]


def test_a_silent_roots_forward_hook_only_hands_over_the_copies(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # The root stays hooked after learning (its forward's end wakes the copier) but, saving
    # nothing, it makes no save decisions for its inputs and outputs.
    full_path_saves = spy_full_path(monkeypatch)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # deferred copies, as on 2 cores
    hook = Hook(out_dir=tmp_path / "run", save_config=SaveConfig(save_interval=1), include_collections=["gradients"])
    model, loss_fn, opt, x = _setup(hook)
    kicks: list[int] = []
    assert hook._deferred is not None
    real_kick = hook._deferred.kick
    monkeypatch.setattr(hook._deferred, "kick", lambda: kicks.append(hook.step) or real_kick())
    for _ in range(4):
        _step(model, loss_fn, opt, x)
    hook.close()
    decided = full_path_saves.named("Net_")
    assert {step for step, name in decided if "_input_" in name or "_output_" in name} == {0}
    assert {1, 2, 3} <= set(kicks)
    grads = {f"gradient/Net_{p}" for p, _ in model.named_parameters()}
    assert set(read_step(tmp_path / "run", 3)[1]) == grads | {"MSELoss_output_0"}


def test_gradient_hooks_only_for_due_gradients(tmp_path: Path) -> None:
    hook = Hook(out_dir=tmp_path / "run", save_config=SaveConfig(save_interval=1), include_collections=["weights"])
    model, loss_fn, opt, x = _setup(hook)
    for _ in range(2):
        _step(model, loss_fn, opt, x)
        assert all(not p._backward_hooks for p in model.parameters())
    hook.close()
    assert set(read_step(tmp_path / "run", 1)[1]) == {"Net_fc1.weight", "Net_fc2.weight", "MSELoss_output_0"}


def test_collections_changed_after_registration_take_effect(tmp_path: Path) -> None:
    hook = Hook(out_dir=tmp_path / "run", save_config=SaveConfig(save_interval=100),
                include_collections=["weights", "custom"])
    model, loss_fn, opt, x = _setup(hook)
    for step in range(6):
        if step == 2:
            hook.get_collection("custom").include("relu_output")
            hook.get_collection("custom").save_config = SaveConfig(save_interval=2)
        if step == 3:
            hook.get_collection("weights").save_config = SaveConfig(save_steps=[5])
        _step(model, loss_fn, opt, x)
    hook.close()
    assert set(read_step(tmp_path / "run", 2)[1]) == {"relu_output_0"}
    assert set(read_step(tmp_path / "run", 4)[1]) == {"relu_output_0"}
    assert set(read_step(tmp_path / "run", 5)[1]) == {"Net_fc1.weight", "Net_fc2.weight"}
    assert not (tmp_path / "run" / "index" / "000000000" / "000000000003_worker_0.json").exists()


def test_shared_activations_are_copied_once_unless_changed_in_place(tmp_path: Path) -> None:
    for inplace in (False, True):
        out = tmp_path / f"run-{inplace}"
        hook = Hook(out_dir=out, save_config=SaveConfig(save_interval=1), save_all=True,
                    reduction_config=ReductionConfig(save_raw_tensor=True))
        model, loss_fn, opt, x = _setup(hook, inplace)
        expected_fc1 = (x @ model.fc1.weight.T + model.fc1.bias).detach().numpy()
        _step(model, loss_fn, opt, x)
        hook.close()
        values = read_step(out, 0)[1]
        np.testing.assert_allclose(values["fc1_output_0"], expected_fc1, rtol=1e-6)
        assert (values["fc1_output_0"] < 0).any()
        relu = np.maximum(expected_fc1, 0)
        np.testing.assert_allclose(values["relu_output_0"], relu, rtol=1e-6)
        np.testing.assert_allclose(values["fc2_input_0"], relu, rtol=1e-6)
        # The relu's input is read after its forward ran: in place, that is the relu's result.
        np.testing.assert_allclose(values["relu_input_0"], relu if inplace else expected_fc1, rtol=1e-6)


def test_disabled_hook_removes_its_callbacks(tmp_path: Path) -> None:
    hook = Hook(out_dir=tmp_path / "run", save_config=SaveConfig(save_interval=1),
                include_collections=["weights", "gradients"])
    model, loss_fn, opt, x = _setup(hook)
    _step(model, loss_fn, opt, x)
    assert model.fc1._forward_hooks
    hook.guard.trip(RuntimeError("test"), "test")
    _step(model, loss_fn, opt, x)
    assert not model.fc1._forward_hooks and not loss_fn._forward_hooks
    hook.close()


def test_a_users_own_gradient_hook_survives_the_cleanup(tmp_path: Path) -> None:
    hook = Hook(out_dir=tmp_path / "run", save_config=SaveConfig(save_steps=[0, 2]),
                include_collections=["gradients"])
    model, loss_fn, opt, x = _setup(hook)
    seen: list[torch.Tensor] = []
    model.fc1.weight.register_hook(lambda g: seen.append(g.clone()))  # type: ignore[no-untyped-call]
    for _ in range(4):
        _step(model, loss_fn, opt, x)
    hook.close()
    assert len(seen) == 4
    assert model.fc1.weight._backward_hooks is not None and len(model.fc1.weight._backward_hooks) == 1
    np.testing.assert_array_equal(read_step(tmp_path / "run", 2)[1]["gradient/Net_fc1.weight"], seen[2].numpy())


class FullRulesHook(Hook):
    """The same hook with the quiet-step shortcut switched off: every step takes the full path."""

    @property
    def _quiet(self) -> int:
        return 0

    @_quiet.setter
    def _quiet(self, value: int) -> None:
        pass


def _saved_steps(out: Path) -> dict[int, tuple[ModeKeys, int, dict[str, np.ndarray]]]:
    result = {}
    for key in sorted(open_store(str(out)).list("index/")):
        step = int(key.rsplit("/", 1)[1].split("_")[0])
        idx, values = read_step(out, step)
        result[step] = (idx.mode, idx.mode_step, values)
    return result


def test_quiet_steps_count_and_save_exactly_like_the_full_rules(tmp_path: Path) -> None:
    """Steps skipped without any check still count every root forward (several per iteration,
    EVAL without backward), per mode; mode switches, scalars and collection changes between
    steps are seen at the very next step."""
    cfg = SaveConfig(mode_save_configs={
        ModeKeys.TRAIN: SaveConfigMode(save_interval=7, start_step=3, end_step=40, save_steps=[1]),
        ModeKeys.EVAL: SaveConfigMode(save_interval=5, save_steps=[2]),
    })
    runs: dict[str, tuple[list[tuple[int, int, dict[ModeKeys, int]]], Path]] = {}
    for kind, cls in (("quiet", Hook), ("full", FullRulesHook)):
        out = tmp_path / kind
        hook = cls(out_dir=out, save_config=cfg, include_collections=["weights", "gradients", "losses"])
        model, loss_fn, opt, x = _setup(hook)
        counters = []
        for it in range(60):
            mode = ModeKeys.EVAL if 20 <= it < 34 or it % 11 == 0 else ModeKeys.TRAIN
            hook.set_mode(mode)
            if it == 25:
                hook.get_collection("biases").save_config = SaveConfig(save_steps=[9, 12])
                hook.collections.include(["biases"])
            if it == 45:
                hook.get_collection("weights").save_config = SaveConfig(save_interval=4)
            if it % 9 == 4:
                hook.save_scalar("lr", 0.1)
            if mode == ModeKeys.TRAIN:
                _step(model, loss_fn, opt, x)
            else:
                with torch.no_grad():
                    loss_fn(model(x), torch.zeros(len(x), 1))
            if it % 13 == 6:
                with torch.no_grad():  # a second root forward in the same iteration: one more step
                    model(x)
            counters.append((hook.step, hook.mode_step, hook.mode_steps))
            # A scalar belongs to the step it was saved in: handed over or dropped at the next one.
            assert not hook._pending_scalars
        hook.close()
        runs[kind] = (counters, out)
    quiet, full = runs["quiet"], runs["full"]
    assert quiet[0] == full[0]
    forwards = [1 + (it % 13 == 6) for it in range(60)]
    assert [c[0] for c in quiet[0]] == [sum(forwards[: i + 1]) - 1 for i in range(60)]
    got, want = _saved_steps(quiet[1]), _saved_steps(full[1])
    assert got.keys() == want.keys() and len(got) > 10
    for step, (mode, mode_step, values) in want.items():
        assert got[step][:2] == (mode, mode_step)
        assert got[step][2].keys() == values.keys(), step
        for name, value in values.items():
            np.testing.assert_array_equal(got[step][2][name], value, err_msg=f"{name} at {step}")
    assert any("scalar/lr" in v[2] for v in got.values())
    assert any("Net_fc1.bias" in v[2] for v in got.values())
