"""The writer process (murphy.hook.writer_process): the steps it writes read back exactly as the
writer thread's; if it dies, the thread writes the rest and nothing is lost; an arena too small
sends arrays whole; a write error it reports disables the hook like the thread's would, and
training goes on; it ends with the hook."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from murphy.hook import SaveConfig
from murphy.hook import writer_process as wp
from murphy.hook.shm_arena import SharedArena
from murphy.hook.torch import Hook
from murphy.storage.memory import InMemoryObjectStore
from murphy.trial import create_trial

STEPS = 8


def train(out: Any, monkeypatch: pytest.MonkeyPatch, process: bool = True, kill_at: int | None = None,
          steps: int = STEPS) -> tuple[Hook, list[np.ndarray]]:
    monkeypatch.setenv("MURPHY_HOOK_WRITER_PROCESS", "1" if process else "0")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # the process needs a second core
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = Hook(out_dir=out, save_config=SaveConfig(save_interval=1), max_block_ms=None,
                include_collections=["weights", "biases", "gradients", "losses"], include_regex=[r"_output_\d+$"])
    hook.register_module(model)
    gen = torch.Generator().manual_seed(1)
    seen = []
    for step in range(steps):
        seen.append(model[0].weight.detach().clone().numpy())
        opt.zero_grad()
        model(torch.randn(8, 16, generator=gen)).pow(2).mean().backward()
        opt.step()
        if step == kill_at:
            hook.flush()
            process = hook._writer.process
            assert process is not None and process.pid is not None
            os.kill(process.pid, signal.SIGKILL)
    hook.close()
    return hook, seen


def values(out: Path) -> dict[tuple[str, int], bytes]:
    trial = create_trial(str(out))
    return {(n, s): trial.tensor(n).value(s).tobytes() for n in trial.tensor_names() for s in trial.tensor(n).steps()}


def test_the_process_writes_what_the_thread_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hook, seen = train(str(tmp_path / "process"), monkeypatch)
    process = hook._writer.process
    assert process is not None and process.steps_written == STEPS
    train(str(tmp_path / "thread"), monkeypatch, process=False)
    by_process, by_thread = values(tmp_path / "process"), values(tmp_path / "thread")
    assert by_process == by_thread and len(by_process) > STEPS * 6
    for step, want in enumerate(seen):
        assert by_process[("Sequential_0.weight", step)] == want.tobytes()
    # The same files (the index files' bytes too, the events' but for their wall times).
    names = sorted(str(p.relative_to(tmp_path / "process")) for p in (tmp_path / "process").rglob("*") if p.is_file())
    assert names == sorted(str(p.relative_to(tmp_path / "thread")) for p in (tmp_path / "thread").rglob("*")
                           if p.is_file())
    for name in names:
        if name.startswith("index/"):
            assert (tmp_path / "process" / name).read_bytes() == (tmp_path / "thread" / name).read_bytes()


def test_the_process_ends_with_the_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pids: set[int] = set()
    write = wp.WriterProcess.write

    def seen(self: wp.WriterProcess, *args: Any) -> Any:
        pids.add(self.pid or 0)
        return write(self, *args)

    monkeypatch.setattr(wp.WriterProcess, "write", seen)
    hook, _ = train(str(tmp_path), monkeypatch, steps=2)
    assert hook._writer.process is not None and hook._writer.process.pid is None
    (pid,) = pids
    with pytest.raises(ProcessLookupError):  # exited and reaped by close()
        os.kill(pid, 0)


def test_a_dead_process_loses_no_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="murphy.hook"):
        hook, seen = train(str(tmp_path / "run"), monkeypatch, kill_at=3)
    assert hook._writer.process is None and hook.enabled is False  # closed, not disabled by an error
    assert hook.guard.disabled is False
    got = values(tmp_path / "run")
    for step, want in enumerate(seen):
        assert got[("Sequential_0.weight", step)] == want.tobytes()
    assert any("writer process went away" in r.getMessage() for r in caplog.records)


def test_arrays_outside_the_arena_are_sent_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wp, "SharedArena", lambda: SharedArena(capacity=4096))
    hook, _ = train(str(tmp_path / "small"), monkeypatch)
    assert hook._writer.process is not None and hook._writer.process.steps_written == STEPS
    assert hook.backend.arena is not None and hook.backend.arena.used <= 4096  # type: ignore[attr-defined]
    monkeypatch.undo()
    train(str(tmp_path / "thread"), monkeypatch, process=False)
    assert values(tmp_path / "small") == values(tmp_path / "thread")


def test_a_write_error_in_the_process_disables_the_hook_not_training(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "events").write_text("not a directory")  # every events file fails to be made
    hook, seen = train(str(out), monkeypatch)
    assert hook.guard.disabled and "Not a directory" in str(hook.guard.error)
    assert len(seen) == STEPS  # training went on


def test_other_stores_keep_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    hook, _ = train(InMemoryObjectStore(), monkeypatch, steps=1)
    assert hook._writer.process is None
