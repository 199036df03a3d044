"""The background writer when the store is slower than training, and its zero-copy write path."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from murphy.hook import SaveConfig
from murphy.hook.base import BaseHook
from murphy.hook.torch import Hook
from murphy.storage import InMemoryObjectStore, LocalObjectStore
from murphy.storage import local as local_store
from murphy.storage.slow import SlowObjectStore
from murphy.tensorio.events import decode_tensor_event
from murphy.tensorio.framing import iter_records
from murphy.trial import create_trial


@pytest.fixture(autouse=True)
def _no_leaked_writer_threads() -> Iterator[None]:
    yield
    alive = [t for t in threading.enumerate() if t.name == "murphy-hook-writer"]
    assert not alive, alive


def _save_steps(hook: BaseHook, steps: int, value: np.ndarray) -> list[float]:
    """Saves ``value`` at ``steps`` steps; returns how long each step start took (it hands the
    previous step to the writer)."""
    took = []
    for i in range(steps):
        t0 = time.perf_counter()
        hook._begin_step()
        took.append(time.perf_counter() - t0)
        hook._save("MSELoss_output_0", value + i)
    return took


def test_slow_store_drops_whole_steps_within_the_budget(caplog: pytest.LogCaptureFixture) -> None:
    # Every put takes 100 ms; the queue holds 2 steps; a step may wait 5 ms. Training must never
    # wait for a put, and what is written is whole steps, counted with the dropped ones.
    store = SlowObjectStore(InMemoryObjectStore(), per_put=0.1)
    hook = BaseHook(store, save_config=SaveConfig(save_interval=1), max_pending_steps=2, max_block_ms=5)
    with caplog.at_level(logging.WARNING, logger="murphy.hook"):
        took = _save_steps(hook, 30, np.zeros(100, dtype=np.float32))
        hook.close()
    assert max(took) < 0.08, took  # well under one put: the wait is capped at 5 ms
    written = sorted(k for k in store.puts if k.startswith("index/"))
    assert hook.steps_dropped > 0
    assert len(written) + hook.steps_dropped == 30
    for key in written:  # every written step has its events file, with the value of that step
        step = int(key.rsplit("/", 1)[1].split("_")[0])
        data = store.inner.get(f"events/{step:012d}/{step:012d}_worker_0.tfevents")
        (payload,) = list(iter_records(data))
        assert decode_tensor_event(payload).value[0] == step
    messages = [r.getMessage() for r in caplog.records]
    assert any("then the step is dropped" in m for m in messages)
    assert any("dropped (1 so far)" in m for m in messages)
    assert any(f"{hook.steps_dropped} saved steps were dropped in all" in m for m in messages)
    assert not hook.guard.disabled


def test_pending_bytes_stay_bounded() -> None:
    # 400 KB steps, at most 1 MB queued: the writer never holds more than the cap (+ the step it
    # is writing), however far behind the store is.
    store = SlowObjectStore(InMemoryObjectStore(), per_put=0.02)
    hook = BaseHook(store, save_config=SaveConfig(save_interval=1), max_pending_steps=100,
                    max_pending_bytes=1_000_000, max_block_ms=1)
    writer = hook._writer
    peak = 0
    for i in range(25):
        hook._begin_step()
        peak = max(peak, writer._pending_bytes)
        hook._save("MSELoss_output_0", np.full(100_000, i, dtype=np.float32))
    hook.close()
    assert 0 < peak <= 1_000_000
    assert hook.steps_dropped > 0 and writer._pending_bytes == 0 and writer._pending_steps == 0


def test_one_step_larger_than_the_byte_cap_is_still_written() -> None:
    store = InMemoryObjectStore()
    hook = BaseHook(store, save_config=SaveConfig(save_interval=1), max_pending_bytes=1000, max_block_ms=1000)
    _save_steps(hook, 3, np.zeros(10_000, dtype=np.float32))
    hook.close()
    assert hook.steps_dropped == 0
    assert len(list(store.list("index/"))) == 3


def test_block_policy_waits_and_drops_nothing() -> None:
    store = SlowObjectStore(InMemoryObjectStore(), per_put=0.01)
    hook = BaseHook(store, save_config=SaveConfig(save_interval=1), max_pending_steps=1, max_block_ms=None)
    _save_steps(hook, 10, np.zeros(10, dtype=np.float32))
    hook.close()
    assert hook.steps_dropped == 0
    assert len([k for k in store.puts if k.startswith("index/")]) == 10


def test_reused_staging_buffers_never_change_written_steps(tmp_path: Path) -> None:
    # The torch backend copies into pooled buffers that come back after each written step: the
    # values read back must still be each step's own.
    model = torch.nn.Linear(32, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    hook = Hook(out_dir=str(tmp_path / "run"), save_config=SaveConfig(save_interval=1),
                include_collections=["weights", "gradients"], max_block_ms=None)
    hook.register_module(model)
    x = torch.randn(16, 32)
    expected = []
    for i in range(12):
        expected.append(model.weight.detach().clone().numpy())
        model(x).pow(2).sum().backward()
        opt.step()
        opt.zero_grad()
        if i == 1:
            hook.flush()  # a writer process may still be starting: let the buffers come back
    hook.close()
    pool = hook.backend._pool  # type: ignore[attr-defined]
    assert pool.reused > 0
    trial = create_trial(str(tmp_path / "run"))
    tensor = trial.tensor("Linear_weight")
    for step, want in enumerate(expected):
        np.testing.assert_array_equal(tensor.value(step), want)


def test_local_put_parts_is_atomic_with_open_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalObjectStore(tmp_path)
    parts = [bytes([i % 251]) * (i % 7) for i in range(2500)]  # more pieces than IOV_MAX
    parts.append(memoryview(np.arange(10, dtype=np.float32)).cast("B"))
    real_writev = os.writev

    calls = []

    def short_writev(fd: int, bufs: list[bytes]) -> int:  # the kernel may write less than asked
        calls.append(len(bufs))
        k = len(bufs) // 3
        head = bytes(bufs[k])[: max(1, len(bufs[k]) // 2)]
        return real_writev(fd, [*bufs[:k], head])

    monkeypatch.setattr(local_store.os, "writev", short_writev)
    store.put_parts("a/b/c.bin", parts)
    assert max(calls) <= 1024 and len(calls) > 3
    assert store.get("a/b/c.bin") == b"".join(bytes(p) for p in parts)
    assert os.listdir(tmp_path / "a" / "b") == ["c.bin"]  # no temp file left
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "a" / "b" / "c.bin").stat().st_mode & 0o777 == 0o666 & ~mask


def test_local_put_leaves_no_temp_file_when_writing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalObjectStore(tmp_path)
    store.put("k", b"old")

    def broken(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(local_store.os, "write", broken)
    with pytest.raises(Exception, match="No space left"):
        store.put("k", b"new")
    assert store.get("k") == b"old"
    assert sorted(os.listdir(tmp_path)) == ["k"]


def test_streamed_step_file_appears_whole_or_not_at_all(tmp_path: Path) -> None:
    from murphy.core.modes import ModeKeys
    from murphy.tensorio.writer import StepWriter

    store = LocalObjectStore(tmp_path)
    writer = StepWriter(store, 3, mode=ModeKeys.TRAIN, stream=True)
    for i in range(60):  # more than one streamed run of records
        writer.add(f"t{i}", np.full(40_000, i, dtype=np.float32), copy=False)
    events = tmp_path / "events" / "000000000003"
    assert [p.name for p in events.iterdir() if not p.name.endswith(".tmp")] == []  # not visible yet
    writer.close()
    data = store.get("events/000000000003/000000000003_worker_0.tfevents")
    values = [decode_tensor_event(p).value for p in iter_records(data)]
    assert [v[0] for v in values] == list(range(60)) and all(v.shape == (40_000,) for v in values)
    assert [p.name for p in events.iterdir()] == ["000000000003_worker_0.tfevents"]
    assert store.exists("index/000000000/000000000003_worker_0.json")

    aborted = StepWriter(store, 4, stream=True)
    for i in range(60):
        aborted.add(f"t{i}", np.zeros(40_000, dtype=np.float32), copy=False)
    aborted.abort()
    assert not (tmp_path / "events" / "000000000004").exists() or not any(
        (tmp_path / "events" / "000000000004").iterdir())
    assert not store.exists("index/000000000/000000000004_worker_0.json")


def test_local_put_skips_a_stale_temp_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A crashed process with the same pid may have left the temp name the counter gives next.
    store = LocalObjectStore(tmp_path)
    store.put("d/x", b"1")
    counter = local_store._tmp_counter
    nxt = next(counter)
    (tmp_path / "d" / f"y.{os.getpid()}-{nxt + 1}.tmp").write_bytes(b"stale")
    monkeypatch.setattr(local_store, "_tmp_counter", iter(range(nxt + 1, nxt + 100)))
    store.put("d/y", b"new")
    assert store.get("d/y") == b"new"
    assert (tmp_path / "d" / f"y.{os.getpid()}-{nxt + 1}.tmp").read_bytes() == b"stale"


def test_flush_after_close_returns_at_once(tmp_path: Path) -> None:
    """A script calling hook.flush() after training closed the hook (XGBoost's after_training
    does) must not wait for a writer thread that is gone: it hung forever before."""
    hook = Hook(out_dir=str(tmp_path / "out"), save_config=SaveConfig(save_interval=1), include_collections=["weights"])
    model = torch.nn.Linear(2, 1)
    hook.register_module(model)
    model(torch.ones(1, 2))
    hook.close()
    done: list[bool] = []
    t = threading.Thread(target=lambda: done.append(hook.flush()), daemon=True)
    t.start()
    t.join(10)
    assert done == [True]
    assert create_trial(str(tmp_path / "out")).steps() == [0]
