"""Deferred gradients saved in one pass at the backward's end (murphy.hook.torch, GradPlan): the
values written equal the on-thread copy's (smdebug's: each backward's gradient, before clipping)
in the patterns that make param.grad differ from that gradient: accumulation over micro-batches,
``torch.autograd.grad`` (no param.grad at all), and a switch to it after the learning steps."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from save_spy import spy_full_path

from murphy.hook import SaveConfig
from murphy.hook.torch import Hook
from murphy.hook.torch_deferred import LATE
from murphy.storage import open_store
from murphy.tensorio.reader import read_index, read_tensor_record

STEPS = 6


def _read(out: Path) -> dict[int, dict[str, np.ndarray]]:
    store = open_store(str(out))
    result: dict[int, dict[str, np.ndarray]] = {}
    for step in range(STEPS):
        key = f"index/000000000/{step:012d}_worker_0.json"
        if not store.exists(key):
            continue
        idx = read_index(store, key)
        result[step] = {e.tensorname: read_tensor_record(store, idx.event_file_name, e.start_idx, e.length).value
                        for e in idx.tensors if e.tensorname.startswith("gradient/")}
    return result


def _train(out: Path, monkeypatch: pytest.MonkeyPatch, *, deferred: bool, micro_batches: int = 1,
           autograd_from: int | None = None) -> tuple[Hook, dict[int, dict[str, np.ndarray]]]:
    """A small MLP saving its gradients every step; returns the hook and each step's gradients as
    the script saw them (per backward pass: the last micro-batch's, as smdebug's hook keeps the
    last value saved under a name; with autograd.grad, what it returned)."""
    monkeypatch.setenv("MURPHY_HOOK_DEFERRED_COPY", "1" if deferred else "0")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # deferral needs two cores
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    loss_fn = torch.nn.CrossEntropyLoss()
    hook = Hook(out_dir=str(out), save_config=SaveConfig(save_interval=1), include_collections=["gradients"])
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    seen: dict[int, dict[str, np.ndarray]] = {}
    for step in range(STEPS):
        opt.zero_grad()
        if autograd_from is not None and step >= autograd_from:
            x, y = torch.randn(4, 6, generator=gen), torch.randint(0, 3, (4,), generator=gen)
            grads = torch.autograd.grad(loss_fn(model(x), y), list(model.parameters()))
            seen[step] = {f"gradient/Sequential_{n}": g.clone().numpy()
                          for (n, _), g in zip(model.named_parameters(), grads, strict=True)}
            with torch.no_grad():
                for p, g in zip(model.parameters(), grads, strict=True):
                    p.sub_(0.1 * g)
            continue
        before = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
        for _ in range(micro_batches):
            x, y = torch.randn(4, 6, generator=gen), torch.randint(0, 3, (4,), generator=gen)
            loss_fn(model(x), y).backward()
            last = {n: (p.grad - before[n]).clone() for n, p in model.named_parameters()}  # type: ignore[operator]
            before = {n: p.grad.clone() for n, p in model.named_parameters()}  # type: ignore[union-attr]
        seen[step] = {f"gradient/Sequential_{n}": g.numpy() for n, g in last.items()}
        opt.step()
    hook.close()
    return hook, seen


def _assert_same(a: dict[int, dict[str, np.ndarray]], b: dict[int, dict[str, np.ndarray]]) -> None:
    assert a.keys() == b.keys()
    for step in a:
        assert a[step].keys() == b[step].keys(), step
        for name in a[step]:
            assert a[step][name].tobytes() == b[step][name].tobytes(), (step, name)


def test_deferred_gradients_are_saved_at_the_backwards_end_without_a_per_gradient_save(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full_path_saves = spy_full_path(monkeypatch)
    hook, seen = _train(tmp_path / "deferred", monkeypatch, deferred=True)
    full_path_saves.recording = False
    # Learning (step 0: copied at the hook), the first deferred step (the full path decides once
    # under the new save key), then each backward's gradients replay those decisions.
    assert {step for step, _ in full_path_saves.named("gradient/")} == {0, 1}
    copies = hook._deferred
    assert copies is not None and copies.invalidated == 0 and copies.state["gradient/Sequential_0.weight"] == LATE
    written = _read(tmp_path / "deferred")
    _assert_same(written, seen)
    _train(tmp_path / "on-thread", monkeypatch, deferred=False)
    _assert_same(written, _read(tmp_path / "on-thread"))


def test_gradients_accumulated_over_micro_batches_equal_the_on_thread_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The second backward adds into an existing param.grad: its gradient is copied at the hook
    # (under the same name, as smdebug saves it), the first one's deferred copy is not written
    # wrong whichever way the race with the copier went.
    _train(tmp_path / "deferred", monkeypatch, deferred=True, micro_batches=2)
    _train(tmp_path / "on-thread", monkeypatch, deferred=False, micro_batches=2)
    deferred, on_thread = _read(tmp_path / "deferred"), _read(tmp_path / "on-thread")
    assert deferred.keys() == on_thread.keys() == set(range(STEPS))
    for step, tensors in deferred.items():
        for name, value in tensors.items():
            assert value.tobytes() == on_thread[step][name].tobytes(), (step, name)


def test_autograd_grad_from_the_start_is_copied_at_the_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hook, seen = _train(tmp_path / "deferred", monkeypatch, deferred=True, autograd_from=0)
    _assert_same(_read(tmp_path / "deferred"), seen)
    assert hook._grad_plan.at_hook == set(seen[0])


def test_autograd_grad_after_learning_misses_one_step_then_is_copied_at_the_hook(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="murphy.hook"):
        _, seen = _train(tmp_path / "deferred", monkeypatch, deferred=True, autograd_from=3)
    written = _read(tmp_path / "deferred")
    # Step 3's gradients never reached param.grad, where the deferred path takes them from: not
    # written (never a wrong value), a warning per name, and copied at the hook from step 4 on.
    assert 3 not in written or not written[3]
    assert sum("without reaching param.grad" in r.getMessage() for r in caplog.records) == len(seen[3])
    _assert_same({s: v for s, v in written.items() if s != 3}, {s: v for s, v in seen.items() if s != 3})


@pytest.mark.parametrize("bucket_view", [False, True], ids=["grads-copied-to-buckets", "grads-are-bucket-views"])
def test_ddp_gradients_deferred_equal_the_on_thread_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         bucket_view: bool) -> None:
    # DistributedDataParallel's reducer runs its own hooks on AccumulateGrad and its own
    # end-of-backward callback, which writes the averaged gradients back into param.grad.
    import torch.distributed as dist

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        written = {}
        for deferred in (True, False):
            monkeypatch.setenv("MURPHY_HOOK_DEFERRED_COPY", "1" if deferred else "0")
            torch.manual_seed(0)
            model = torch.nn.parallel.DistributedDataParallel(
                torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)),
                gradient_as_bucket_view=bucket_view)
            out = tmp_path / ("deferred" if deferred else "on-thread")
            hook = Hook(out_dir=str(out), save_config=SaveConfig(save_interval=1), include_collections=["gradients"])
            hook.register_module(model)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            gen = torch.Generator().manual_seed(1)
            seen = {}
            for step in range(STEPS):
                opt.zero_grad()
                x, y = torch.randn(4, 6, generator=gen), torch.randint(0, 3, (4,), generator=gen)
                torch.nn.functional.cross_entropy(model(x), y).backward()
                seen[step] = {f"gradient/DistributedDataParallel_{n}": p.grad.clone().numpy()  # type: ignore[union-attr]
                              for n, p in model.named_parameters()}
                opt.step()
            hook.close()
            written[deferred] = _read(out)
            _assert_same(written[deferred], seen)
            assert hook._deferred is None or hook._deferred.invalidated == 0
        _assert_same(written[True], written[False])
    finally:
        dist.destroy_process_group()
