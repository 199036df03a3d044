"""The batch read (``Trial.tensor_values``): exactly what per-step ``value()`` calls give, the
same error per step where a value cannot be read (a damaged file costs only its steps), new
steps of a live trial picked up, and one request per events file."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.exceptions import MurphyError, SMDebugError
from murphy.storage import InMemoryObjectStore
from murphy.storage.base import ObjectStore
from murphy.storage.recording import RecordingObjectStore
from murphy.tensorio.locations import event_file_key
from murphy.trial import Trial, create_trial

from .conftest import end, tval, write_colls, write_step

WORKERS = ("worker_0", "worker_1")


def per_step(trial: Trial, name: str, steps: list[int], mode: ModeKeys = ModeKeys.GLOBAL,
             worker: str | None = None) -> dict[int, Any]:
    """``{step: value bytes and dtype, or the exception type}`` the one-step API gives."""
    out: dict[int, Any] = {}
    for s in steps:
        try:
            v = trial.tensor(name).value(s, mode=mode, worker=worker)
            out[s] = (v.dtype.str, v.shape, v.tobytes())
        except (SMDebugError, MurphyError) as exc:
            out[s] = type(exc)
    return out


def batched(trial: Trial, name: str, steps: list[int] | None, mode: ModeKeys = ModeKeys.GLOBAL,
            worker: str | None = None) -> dict[int, Any]:
    got = trial.tensor_values([name], steps, mode=mode, worker=worker)[name]
    assert len(got.steps) == len(got.values) and not set(got.steps) & set(got.errors)
    out: dict[int, Any] = {s: (v.dtype.str, v.shape, v.tobytes()) for s, v in zip(got.steps, got.values, strict=True)}
    out.update({s: type(e) for s, e in got.errors.items()})
    return dict(sorted(out.items()))


def _write(store: ObjectStore, steps: range, workers: tuple[str, ...] = WORKERS) -> None:
    for s in steps:
        mode = ModeKeys.EVAL if s % 5 == 4 else ModeKeys.TRAIN
        for w in workers:
            tensors: dict[str, Any] = {"loss": np.float32(1.0 / (s + 1)), "w": tval("w", s, w)}
            if s % 3 == 0:
                tensors["rare"] = np.arange(s, s + 4, dtype=np.int64)
            if w == "worker_0" and s % 2 == 0:
                tensors["only0"] = tval("only0", s, w)
            reds = {"g": {("l2", False): np.float32(s)}} if s % 4 == 0 else None
            write_step(store, s, tensors, worker=w, mode=mode, mode_step=s // 5 if mode is ModeKeys.EVAL else s,
                       reductions=reds)


NAMES = ["loss", "w", "rare", "only0", "g"]


def test_equals_per_step_reads_for_every_tensor_mode_and_worker(store: ObjectStore) -> None:
    write_colls(store, WORKERS)
    _write(store, range(20))
    end(store)
    trial = create_trial(store)
    everything = list(range(-1, 22))  # steps that do not exist, too
    for name in NAMES:
        assert batched(trial, name, everything) == per_step(trial, name, everything)
        assert batched(trial, name, None) == per_step(trial, name, trial.tensor(name).steps())
        for mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            assert batched(trial, name, everything, mode) == per_step(trial, name, everything, mode)
        for worker in (*WORKERS, "worker_9"):
            assert batched(trial, name, everything, worker=worker) == per_step(trial, name, everything, worker=worker)
    # every kind of answer was exercised: values, a reductions-only tensor, unsaved steps
    kinds = {v if isinstance(v, type) else "value" for v in batched(trial, "g", everything).values()}
    assert "value" not in kinds and len(kinds) >= 2
    assert "value" in {v if isinstance(v, type) else "value" for v in batched(trial, "rare", everything).values()}


def test_several_tensors_at_once_and_steps_per_tensor(store: ObjectStore) -> None:
    write_colls(store, WORKERS)
    _write(store, range(12))
    end(store)
    trial = create_trial(store)
    got = trial.tensor_values(["loss", "w"], {"loss": [3, 1, 3], "w": range(5, 9)})
    assert got["loss"].steps == [1, 3] and got["w"].steps == [5, 6, 7, 8]
    for name, res in got.items():
        for s, v in zip(res.steps, res.values, strict=True):
            np.testing.assert_array_equal(v, trial.tensor(name).value(s))


@pytest.mark.parametrize("damage", ["garbage", "truncated", "missing", "emptied"])
def test_a_damaged_events_file_costs_only_its_steps(damage: str, store: ObjectStore) -> None:
    write_colls(store, ("worker_0",))
    _write(store, range(10), ("worker_0",))
    end(store)
    key = event_file_key(6, "worker_0")
    data = store.get(key)
    if damage == "garbage":
        store.put(key, bytes(len(data)))
    elif damage == "truncated":
        store.put(key, data[: _first_record_end(create_trial(store), 6) + 10])
    elif damage == "missing":
        store.delete(key)
    else:
        store.put(key, b"")
    trial = create_trial(store, missing_event_timeout=0.2)
    for name in ("loss", "w"):
        want = per_step(trial, name, list(range(10)))
        got = batched(trial, name, None)
        assert got == want
        bad = damage != "truncated" or name != "loss"  # cut after the first record: loss still reads
        assert isinstance(got[6], type) is bad and all(not isinstance(got[s], type) for s in range(10) if s != 6)


def _first_record_end(trial: Trial, step: int) -> int:
    slots = trial._slots(step, "loss")
    assert slots is not None
    _, slot = slots["worker_0"]  # loss is the step's first record
    assert slot.span is not None and slot.span[0] == 0
    return slot.span[1]


def test_a_live_trial_s_new_steps_are_picked_up(store: ObjectStore) -> None:
    write_colls(store, ("worker_0",))
    _write(store, range(5), ("worker_0",))
    trial = create_trial(store, poll_interval=0.0)
    first = trial.tensor_values(["loss"])["loss"]
    assert first.steps == trial.tensor("loss").steps() and first.steps[:4] == [0, 1, 2, 3]
    _write(store, range(5, 9), ("worker_0",))
    end(store)
    again = trial.tensor_values(["loss"])["loss"]
    assert again.steps == list(range(9))
    new = trial.tensor_values(["loss"], range(first.steps[-1] + 1, 9))["loss"]
    assert new.steps == [s for s in range(9) if s > first.steps[-1]]
    assert batched(trial, "loss", None) == per_step(trial, "loss", list(range(9)))


def test_one_request_per_events_file() -> None:
    inner = InMemoryObjectStore()
    write_colls(inner, ("worker_0",))
    _write(inner, range(30), ("worker_0",))
    end(inner)
    rec = RecordingObjectStore(inner)
    trial = create_trial(rec)
    rec.clear()
    got = trial.tensor_values(["loss", "w", "rare"])
    assert sum(len(r.values) for r in got.values()) == 30 + 30 + 10
    events = [g for g in rec.gets if g[0].startswith("events/")]
    assert len(events) == 30 and len({g[0] for g in events}) == 30  # one ranged get per file
    assert all(length is not None for _, _, length in events)
    # per-step reads of the same values: one get per value, then the whole file
    rec.clear()
    for name in ("loss", "w"):
        for s in range(30):
            trial.tensor(name).value(s)
    assert len([g for g in rec.gets if g[0].startswith("events/")]) >= 60


def test_an_unknown_tensor_raises_like_tensor() -> None:
    store = InMemoryObjectStore()
    write_colls(store, ("worker_0",))
    _write(store, range(2), ("worker_0",))
    trial = create_trial(store)
    with pytest.raises(SMDebugError) as batch_err:
        trial.tensor_values(["nope"])
    with pytest.raises(SMDebugError) as one_err:
        trial.tensor("nope")
    assert type(batch_err.value) is type(one_err.value)
