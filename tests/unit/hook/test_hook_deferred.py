"""Deferred snapshot copies (murphy.hook.torch_deferred): every value written equals what the
on-thread copy writes (smdebug's semantics: weights before the step's update, the backward's
gradients before clipping, layer outputs as the forward hook saw them), whatever the script does
in place afterwards; a tensor changed before its copy was checked is never written wrong."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from save_spy import spy_full_path

from murphy.hook import SaveConfig
from murphy.hook.torch import Hook
from murphy.hook.torch_deferred import DEFERRED, LATE, ON_THREAD, DeferredSnap
from murphy.hook.writer import BackgroundWriter, StepBatch
from murphy.storage import open_store
from murphy.tensorio.reader import read_index, read_tensor_record

STEPS = 6


class Net(torch.nn.Module):
    """conv → in-place ReLU (changes the conv's saved output) → linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.relu = torch.nn.ReLU(inplace=True)
        self.fc1 = torch.nn.Linear(4 * 6 * 6, 16)
        self.fc2 = torch.nn.Linear(16, 3)
        self.mutate_fc1_from: int | None = None
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(torch.flatten(self.relu(self.conv(x)), 1))
        if self.mutate_fc1_from is not None and self.calls >= self.mutate_fc1_from:
            h.mul_(0.5)  # an in-place change of a saved output that the learning steps never saw
        self.calls += 1
        out: torch.Tensor = self.fc2(h)
        return out


def read_all(out: Path, steps: int = STEPS) -> dict[int, dict[str, np.ndarray]]:
    store = open_store(str(out))
    result = {}
    for step in range(steps):
        idx = read_index(store, f"index/{step // 1000:09d}/{step:012d}_worker_0.json")
        result[step] = {e.tensorname: read_tensor_record(store, idx.event_file_name, e.start_idx, e.length).value
                        for e in idx.tensors}
    return result


def run(out: Path, *, deferred: bool, monkeypatch: pytest.MonkeyPatch, set_to_none: bool = True,
        clip: bool = False, mutate_from: int | None = None, optimizer: bool = True, mutate_out_from: int | None = None,
        expect: dict[int, dict[str, np.ndarray]] | None = None, cores: int = 2, forward_only_last: bool = False,
        clip_from: int | None = None, grads_after_step_from: int | None = None, copier: str | None = "thread") -> Hook:
    monkeypatch.setenv("MURPHY_HOOK_DEFERRED_COPY", "1" if deferred else "0")
    # "thread": a copier thread copies between the fences; "fences": the fences copy everything
    # (what a hook with a writer process on two cores does); None: the hook's own choice.
    if copier is None:
        monkeypatch.delenv("MURPHY_HOOK_COPIER", raising=False)
    else:
        monkeypatch.setenv("MURPHY_HOOK_COPIER", "1" if copier == "thread" else "0")
    # The hook defers only with a second core: the tests do not depend on the machine's.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    torch.manual_seed(0)
    model, loss_fn = Net(), torch.nn.CrossEntropyLoss()
    model.mutate_fc1_from = mutate_from
    hook = Hook(out_dir=str(out), save_config=SaveConfig(save_interval=1),
                include_collections=["weights", "biases", "gradients"], include_regex=[r"_output_\d+$"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    for step in range(STEPS):
        x, y = torch.randn(8, 1, 8, 8, generator=gen), torch.randint(0, 3, (8,), generator=gen)
        if expect is not None:
            expect[step] = {f"Net_{n}": p.detach().clone().numpy() for n, p in model.named_parameters()}
        opt.zero_grad(set_to_none=set_to_none)
        logits = model(x)
        if mutate_out_from is not None and step >= mutate_out_from:
            with torch.no_grad():
                logits.mul_(2.0)  # one tensor saved under two names: fc2_output_0 and Net_output_0
        loss_fn(logits, y).backward()
        if expect is not None:
            expect[step] |= {f"gradient/Net_{n}": p.grad.clone().numpy() for n, p in model.named_parameters()
                             if p.grad is not None}
        if clip or (clip_from is not None and step >= clip_from):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)  # in place on param.grad
        if optimizer:
            opt.step()  # changes the weights in place right after they were saved
        else:
            with torch.no_grad():
                for p in model.parameters():
                    p.sub_(0.1 * p.grad)  # type: ignore[operator]
        if grads_after_step_from is not None and step >= grads_after_step_from:
            with torch.no_grad():
                for p in model.parameters():
                    p.grad.mul_(0.0)  # type: ignore[union-attr]  # after the step, before the next one
    if forward_only_last:
        with torch.no_grad():  # a last saved step with no backward and no optimizer: no in-step fence
            model(torch.randn(8, 1, 8, 8, generator=gen))
    hook.close()
    return hook


def assert_same(a: dict[int, dict[str, np.ndarray]], b: dict[int, dict[str, np.ndarray]]) -> None:
    assert a.keys() == b.keys()
    for step in a:
        assert a[step].keys() == b[step].keys(), step
        for name in a[step]:
            assert a[step][name].dtype == b[step][name].dtype, (step, name)
            assert a[step][name].tobytes() == b[step][name].tobytes(), (step, name)


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    yield
    alive = [t.name for t in threading.enumerate() if t.name in ("murphy-hook-writer", "murphy-hook-copier")]
    assert not alive


@pytest.mark.parametrize("set_to_none", [True, False], ids=["zero_grad-set_to_none", "zero_grad-in-place"])
@pytest.mark.parametrize("clip", [False, True], ids=["no-clip", "clip-after-backward"])
@pytest.mark.parametrize("copier", ["thread", "fences"])
def test_deferred_values_equal_the_on_thread_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  set_to_none: bool, clip: bool, copier: str) -> None:
    expect: dict[int, dict[str, np.ndarray]] = {}
    hook = run(tmp_path / "deferred", deferred=True, monkeypatch=monkeypatch, copier=copier, set_to_none=set_to_none, clip=clip,
               expect=expect)
    run(tmp_path / "on-thread", deferred=False, monkeypatch=monkeypatch, set_to_none=set_to_none, clip=clip)
    deferred, on_thread = read_all(tmp_path / "deferred"), read_all(tmp_path / "on-thread")
    assert_same(deferred, on_thread)
    # ... and both are smdebug's values: weights before the update, gradients before clipping.
    for step, tensors in expect.items():
        for name, value in tensors.items():
            assert deferred[step][name].tobytes() == value.tobytes(), (step, name)
    assert "conv_output_0" in deferred[3] and "fc1_output_0" in deferred[3]
    copies = hook._deferred
    assert copies is not None and copies.invalidated == 0
    # The copies really were deferred: weights (fenced at the optimizer's step), outputs (at the
    # step's end) and gradients (at the step's end; at the end of backward where clipping or an
    # in-place zero_grad changes them later); the conv output, changed by the in-place ReLU, is
    # copied on the thread.
    assert copies.state["Net_fc1.weight"] == DEFERRED and copies.state["fc2_output_0"] == LATE
    assert copies.state["conv_output_0"] == ON_THREAD
    assert copies.state["gradient/Net_fc1.weight"] == (LATE if set_to_none and not clip else DEFERRED)
    assert copies.copied_off_thread + copies.copied_on_thread >= (STEPS - 1) * 8


def test_without_an_optimizer_the_backward_fence_covers_manual_updates(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run(tmp_path / "deferred", deferred=True, monkeypatch=monkeypatch, optimizer=False)
    run(tmp_path / "on-thread", deferred=False, monkeypatch=monkeypatch, optimizer=False)
    assert_same(read_all(tmp_path / "deferred"), read_all(tmp_path / "on-thread"))


@pytest.mark.parametrize("copier", ["thread", "fences"])
def test_a_tensor_changed_before_its_copy_was_checked_is_not_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, copier: str) -> None:
    # From step 3 the script scales fc1's output in place after its forward hook saved it: the
    # learning step never saw that, so step 3's deferred copy may hold either value.
    with caplog.at_level(logging.WARNING, logger="murphy.hook"):
        hook = run(tmp_path / "deferred", deferred=True, monkeypatch=monkeypatch, copier=copier, mutate_from=3)
    run(tmp_path / "on-thread", deferred=False, monkeypatch=monkeypatch, mutate_from=3)
    deferred, on_thread = read_all(tmp_path / "deferred"), read_all(tmp_path / "on-thread")
    assert "fc1_output_0" not in deferred[3]
    del on_thread[3]["fc1_output_0"]
    assert_same(deferred, on_thread)  # every other value, and fc1's at steps 4-5, copied on the thread
    assert hook._deferred is not None and hook._deferred.invalidated == 1
    assert hook._deferred.state["fc1_output_0"] == ON_THREAD
    assert any("fc1_output_0 changed in place" in r.getMessage() for r in caplog.records)


def test_the_switch_turns_deferral_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hook = run(tmp_path, deferred=False, monkeypatch=monkeypatch)
    assert hook._deferred is None


@pytest.mark.parametrize(("cores", "process", "forced", "thread"), [
    (2, True, None, False), (3, True, None, True), (2, False, None, True), (2, True, "1", True), (3, True, "0", False),
])
def test_the_copier_thread_runs_only_where_it_has_a_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cores: int,
                                                         process: bool, forced: str | None, thread: bool) -> None:
    # With a writer process on two cores the fences copy (no copier thread); MURPHY_HOOK_COPIER forces either.
    if not process:
        monkeypatch.setenv("MURPHY_HOOK_WRITER_PROCESS", "0")
    started: list[str] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    hook = run(tmp_path / "deferred", deferred=True, monkeypatch=monkeypatch, cores=cores,
               copier=None if forced is None else {"1": "thread", "0": "fences"}[forced])
    copies = hook._deferred
    assert copies is not None and copies.background is thread
    assert ("murphy-hook-copier" in started) is thread
    writer_process = hook._writer.process
    assert (writer_process is not None and writer_process.steps_written == STEPS) is process
    assert (copies.copied_off_thread > 0) is thread and copies.invalidated == 0
    monkeypatch.undo()
    run(tmp_path / "on-thread", deferred=False, monkeypatch=monkeypatch)
    assert_same(read_all(tmp_path / "deferred"), read_all(tmp_path / "on-thread"))


def test_one_core_copies_on_the_training_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing to gain without a second core: the copier would only add thread switches.
    hook = run(tmp_path, deferred=True, monkeypatch=monkeypatch, cores=1)
    assert hook._deferred is None


@pytest.mark.parametrize("where", ["fence", "copy"])
def test_a_failing_deferred_copy_never_breaks_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       where: str) -> None:
    from murphy.hook.torch_deferred import DeferredCopies

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("copier exploded")

    original: Callable[..., None] = DeferredCopies._copy

    def bad_copy(self: DeferredCopies, snap: object) -> None:
        original(self, snap)
        raise RuntimeError("copier exploded")

    monkeypatch.setattr(DeferredCopies, "fence" if where == "fence" else "_copy", boom if where == "fence" else bad_copy)
    expect: dict[int, dict[str, np.ndarray]] = {}
    run(tmp_path / "a", deferred=True, monkeypatch=monkeypatch, expect=expect)
    monkeypatch.undo()
    expect_plain: dict[int, dict[str, np.ndarray]] = {}
    run(tmp_path / "b", deferred=False, monkeypatch=monkeypatch, expect=expect_plain)
    # Training went on unchanged: the weights seen at every step are the hook-free run's.
    assert_same(expect, expect_plain)


@pytest.mark.parametrize("copier", ["thread", "fences"])
def test_a_changed_tensor_saved_under_two_names_is_left_out_under_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copier: str) -> None:
    hook = run(tmp_path / "deferred", deferred=True, monkeypatch=monkeypatch, copier=copier, mutate_out_from=3)
    run(tmp_path / "on-thread", deferred=False, monkeypatch=monkeypatch, mutate_out_from=3)
    deferred, on_thread = read_all(tmp_path / "deferred"), read_all(tmp_path / "on-thread")
    names = {"fc2_output_0", "Net_output_0"}
    assert not names & deferred[3].keys() and names <= deferred[4].keys()
    for name in names:
        del on_thread[3][name]
    assert_same(deferred, on_thread)
    assert hook._deferred is not None and hook._deferred.invalidated == 1
    assert all(hook._deferred.state[n] == ON_THREAD for n in names)


@pytest.mark.parametrize("copier", ["thread", "fences"])
def test_every_step_is_fenced_before_it_is_queued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copier: str) -> None:
    # The step's end is the only fence of a forward-only step: its deferred copies must be done
    # and checked (the fence drops each snap's source) before the writer may see them.
    unfenced: list[tuple[int, str]] = []
    submit = BackgroundWriter.submit_step

    def checked(self: BackgroundWriter, batch: StepBatch) -> None:
        unfenced.extend((batch.step, r.name) for r in batch.records
                        if isinstance(r.snap, DeferredSnap) and r.snap.src is not None)
        submit(self, batch)

    monkeypatch.setattr(BackgroundWriter, "submit_step", checked)
    hook = run(tmp_path, deferred=True, monkeypatch=monkeypatch, copier=copier, forward_only_last=True)
    assert hook._deferred is not None and hook._deferred.copied_off_thread + hook._deferred.copied_on_thread > 0
    assert "fc2_output_0" in read_all(tmp_path, STEPS + 1)[STEPS]  # the forward-only step was written
    assert unfenced == []


@pytest.mark.parametrize("copier", ["thread", "fences"])
def test_late_names_are_fenced_only_at_the_steps_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copier: str) -> None:
    # After the learning step, a step with an optimizer fences its gradients and outputs only at
    # its end: the end of backward hands them to the copier and fences nothing.
    from murphy.hook.torch_deferred import DeferredCopies

    calls: list[tuple[DeferredCopies, bool, bool]] = []
    original = DeferredCopies.fence

    def counted(self: DeferredCopies, in_step: bool, optimizer: bool = False) -> None:
        calls.append((self, in_step, optimizer))
        original(self, in_step, optimizer)

    monkeypatch.setattr(DeferredCopies, "fence", counted)
    hook = run(tmp_path, deferred=True, monkeypatch=monkeypatch, copier=copier)
    copies = hook._deferred
    assert copies is not None and copies.invalidated == 0
    # This hook's fences only: torch's optimizer pre-hook is global, so a hook another test left
    # unclosed is fenced at this test's optimizer steps too.
    fences = [(i, o) for c, i, o in calls if c is copies]
    # One learning step (its backward fence judges the names), then per step one optimizer fence
    # and one step-end fence (plus close()'s).
    assert fences.count((True, False)) == 1
    assert fences.count((True, True)) == STEPS and fences.count((False, False)) >= STEPS
    if copier == "thread":
        assert copies.copied_off_thread > copies.copied_on_thread
    else:  # no copier thread: the fences did every copy
        assert copies.copied_off_thread == 0 and copies.copied_on_thread >= (STEPS - 1) * 8


@pytest.mark.parametrize("change", ["clip_from", "grads_after_step_from"])
@pytest.mark.parametrize("copier", ["thread", "fences"])
def test_a_late_name_changed_after_learning_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture, change: str, copier: str) -> None:
    # From step 3 the script clips the gradients after backward (or scales them in place after
    # the optimizer step): the learning step saw neither, so step 3's late copies may hold the
    # changed values. They are left out, warned about, and copied on the thread from step 4.
    kwargs = {change: 3}
    with caplog.at_level(logging.WARNING, logger="murphy.hook"):
        hook = run(tmp_path / "deferred", deferred=True, monkeypatch=monkeypatch, copier=copier, **kwargs)  # type: ignore[arg-type]
    run(tmp_path / "on-thread", deferred=False, monkeypatch=monkeypatch, **kwargs)  # type: ignore[arg-type]
    deferred, on_thread = read_all(tmp_path / "deferred"), read_all(tmp_path / "on-thread")
    grads = {n for n in on_thread[3] if n.startswith("gradient/")}
    assert grads and not grads & deferred[3].keys()
    for name in grads:
        del on_thread[3][name]
    assert_same(deferred, on_thread)  # nothing written differs from the on-thread copy
    copies = hook._deferred
    assert copies is not None and copies.invalidated == len(grads)
    assert all(copies.state[n] == ON_THREAD for n in grads)
    assert any("gradient/Net_fc1.weight changed in place" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("foreach", ["works", "refuses"])
@pytest.mark.parametrize("copier", ["thread", "fences"])
def test_the_copier_copies_a_run_of_snapshots_in_one_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          foreach: str, copier: str) -> None:
    # One GIL release per run of queued snapshots, not per tensor; if torch refuses the batched
    # copy, the copier copies them one by one and nothing is lost.
    calls: list[int] = []
    original = torch._foreach_copy_

    def counted(dsts: list[torch.Tensor], srcs: list[torch.Tensor]) -> None:
        calls.append(len(srcs))
        if foreach == "refuses":
            raise RuntimeError("no batched copy here")
        original(dsts, srcs)

    monkeypatch.setattr(torch, "_foreach_copy_", counted)
    hook = run(tmp_path / "deferred", deferred=True, monkeypatch=monkeypatch, copier=copier)
    monkeypatch.setattr(torch, "_foreach_copy_", original)
    run(tmp_path / "on-thread", deferred=False, monkeypatch=monkeypatch)
    assert_same(read_all(tmp_path / "deferred"), read_all(tmp_path / "on-thread"))
    assert calls and max(calls) > 1
    assert hook._deferred is not None and hook._deferred.invalidated == 0


def test_later_steps_replay_the_parameters_decisions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Under an unchanged save key the weights' decisions of the first step are replayed: the
    # deferred ones go straight to the copier (not through the full save path) and the values
    # written are still the on-thread copy's.
    full_path_saves = spy_full_path(monkeypatch)
    run(tmp_path / "deferred", deferred=True, monkeypatch=monkeypatch)
    full_path_saves.recording = False
    params = 6  # conv, fc1, fc2: weight and bias
    # The first two steps take the full path (the first one's decisions record the names in
    # their collections: a new save key), the later ones replay.
    assert len([n for _, n in full_path_saves.named("Net_") if "output" not in n]) == 2 * params
    run(tmp_path / "on-thread", deferred=False, monkeypatch=monkeypatch)
    assert_same(read_all(tmp_path / "deferred"), read_all(tmp_path / "on-thread"))
