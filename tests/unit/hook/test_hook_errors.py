"""The hook never breaks training; the writer applies back-pressure and close() flushes."""

from __future__ import annotations

import logging
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
from murphy.storage import InMemoryObjectStore, ObjectStore, open_store
from murphy.storage.slow import SlowObjectStore


class FailingStore(InMemoryObjectStore):
    """A store whose puts fail (a full disk, revoked credentials...)."""

    def put(self, key: str, data: bytes) -> None:
        raise OSError(f"disk full writing {key}")


def train(hook: Hook, steps: int = 5) -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    loss_fn = torch.nn.MSELoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    hook.close()
    return model


def all_cfg() -> dict[str, object]:
    return {"save_config": SaveConfig(save_interval=1), "include_collections": ["weights", "gradients"]}


def errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "murphy.hook" and r.levelno >= logging.ERROR]


def test_training_finishes_when_the_store_fails(caplog: pytest.LogCaptureFixture) -> None:
    hook = Hook(out_dir=FailingStore(), **all_cfg())  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="murphy.hook"):
        model = train(hook, steps=6)
    torch.manual_seed(0)
    untrained = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    assert hook.guard.disabled and not hook.enabled
    assert isinstance(hook.guard.error, OSError)
    logged = errors(caplog)
    assert len(logged) == 1 and logged[0].exc_info is not None
    assert "disk full" in str(logged[0].exc_info[1])
    # training really ran: the weights moved away from their (seeded) initial values
    assert not torch.equal(model[0].weight, untrained[0].weight)


def test_training_finishes_when_a_tensor_cannot_be_encoded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hook = Hook(out_dir=str(tmp_path), **all_cfg())  # type: ignore[arg-type]
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    hook.register_module(model)
    with caplog.at_level(logging.ERROR, logger="murphy.hook"):
        for step in range(4):
            model(torch.ones(1, 2)).sum().backward()
            if step == 1:
                hook.save_tensor("bad", np.array([object()], dtype=object), "custom")
    hook.close()
    assert hook.guard.disabled
    assert len(errors(caplog)) == 1
    store = open_store(str(tmp_path))
    written = set(store.list("index/"))
    assert "index/000000000/000000000000_worker_0.json" in written  # before the bad one
    assert "index/000000000/000000000003_worker_0.json" not in written  # disabled after it


def test_training_thread_error_disables_hook(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    hook = Hook(out_dir=str(tmp_path), **all_cfg())  # type: ignore[arg-type]

    def boom(value: object) -> object:
        raise RuntimeError("snapshot failed")

    monkeypatch.setattr(hook.backend, "snapshot", boom)
    with caplog.at_level(logging.ERROR, logger="murphy.hook"):
        train(hook, steps=4)
    assert hook.guard.disabled and len(errors(caplog)) == 1
    assert "snapshot failed" in str(hook.guard.error)


def test_back_pressure_loses_nothing_and_close_flushes(caplog: pytest.LogCaptureFixture) -> None:
    # The "block" policy (max_block_ms=None): the training thread waits, no step is dropped.
    store = SlowObjectStore(InMemoryObjectStore(), per_put=0.01)
    hook = BaseHook(store, save_config=SaveConfig(save_interval=1), max_pending_steps=1, max_block_ms=None)
    with caplog.at_level(logging.WARNING, logger="murphy.hook"):
        for _ in range(8):
            hook._begin_step()
            hook._save("MSELoss_output_0", np.float32(1.0))
        hook.close()
    index = [k for k in store.puts if k.startswith("index/")]
    assert len(index) == 8
    assert store.puts[-1] == "training_job_end.ts"
    assert any("waits for the writer" in r.getMessage() for r in caplog.records)
    assert not hook.guard.disabled and hook.steps_dropped == 0


def test_events_before_index_and_collections_after_first_step() -> None:
    store = SlowObjectStore(InMemoryObjectStore())
    hook = BaseHook(store, save_config=SaveConfig(save_interval=1))
    for _ in range(3):
        hook._begin_step()
        hook._save("MSELoss_output_0", np.float32(1.0))
    hook.close()
    puts = store.puts
    assert puts.index("events/000000000000/000000000000_worker_0.tfevents") < puts.index(
        "index/000000000/000000000000_worker_0.json") < puts.index("collections/000000000/worker_0_collections.json")
    assert puts.count("collections/000000000/worker_0_collections.json") == 1


def test_training_thread_is_not_blocked_by_writes(tmp_path: Path) -> None:
    # The store takes 20 ms per put; a step on the training thread must not wait for it.
    store = SlowObjectStore(InMemoryObjectStore(), per_put=0.02)
    hook = Hook(out_dir=store, save_config=SaveConfig(save_interval=1), max_pending_steps=64,
                include_collections=["weights", "gradients"])
    model = torch.nn.Linear(16, 16)
    hook.register_module(model)
    x = torch.randn(4, 16)
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        model(x).sum().backward()
        times.append(time.perf_counter() - t0)
    hook.close()
    assert sorted(times)[len(times) // 2] < 0.02  # median well under one put
    assert len([k for k in store.puts if k.startswith("index/")]) == 10


@pytest.fixture(autouse=True)
def _no_leaked_writer_threads() -> Iterator[None]:
    yield
    alive = [t for t in threading.enumerate() if t.name == "murphy-hook-writer"]
    assert not alive, alive


def test_memory_uri_store(tmp_path: Path) -> None:
    store: ObjectStore = open_store("memory://hooktest")
    train(Hook(out_dir="memory://hooktest", **all_cfg()), steps=2)  # type: ignore[arg-type]
    assert store.exists("training_job_end.ts")
    assert store.exists("index/000000000/000000000001_worker_0.json")
