"""TensorCache's series read through the batch path equal the step-by-step path (values, NaN and
Inf, a damaged record falling back to its stored reductions), and a live job's later requests
read only the new steps."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from murphy.core.collection import Collection, CollectionsDoc
from murphy.core.modes import ModeKeys
from murphy.storage import InMemoryObjectStore
from murphy.storage.recording import RecordingObjectStore
from murphy.tensorio.locations import event_file_key, reduction_tensor_name
from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training
from murphy.trial import create_trial
from murphy.ui.tensors import STATS, TensorCache, TensorSeries


def _write(store: Any, steps: range) -> None:
    for s in steps:
        with StepWriter(store, s, "worker_0", ModeKeys.TRAIN, s) as w:
            loss = math.nan if s % 17 == 16 else math.inf if s % 23 == 22 else 1.0 / (s + 1)
            w.add("loss", np.float32(loss))
            w.add("w", np.random.default_rng(s).standard_normal((3, 4)).astype(np.float32))
            w.add(reduction_tensor_name("w", "l2", False), np.float32(s))
            w.add(reduction_tensor_name("w", "max", False), np.float32(-s))


def _reference(store: Any, name: str) -> TensorSeries:
    """The series as the step-by-step path builds it."""
    trial = create_trial(store, no_marker_timeout=0)
    tensor = trial.tensor(name)
    ref = TensorSeries(name)
    for step in tensor.steps():
        stats, shape, dtype = TensorCache._read(tensor, step)
        TensorCache._append(ref, [step], [[v] for v in stats], [shape], dtype)
    return ref


def _same(a: TensorSeries, b: TensorSeries) -> None:
    assert a.steps == b.steps and a.shapes == b.shapes and a.dtype == b.dtype
    for i, stat in enumerate(STATS):
        np.testing.assert_array_equal(np.asarray(a.cols[i]), np.asarray(b.cols[i]), err_msg=stat)


def test_batch_series_equal_the_step_by_step_path_with_a_damaged_record() -> None:
    store = InMemoryObjectStore()
    write_collections(store, CollectionsDoc({"all": Collection("all", include_regex=[".*"])}, 1))
    _write(store, range(60))
    write_end_of_training(store)
    key = event_file_key(30, "worker_0")
    data = bytearray(store.get(key))
    slots = create_trial(store)._slots(30, "w")
    assert slots is not None and slots["worker_0"][1].span is not None
    data[slots["worker_0"][1].span[0] + 2] ^= 0xFF  # w's record length: its CRC no longer matches
    store.put(key, bytes(data))
    cache = TensorCache(lambda: store)
    for name in ("loss", "w"):
        got = cache.series(name)
        _same(got, _reference(store, name))
    w = cache.series("w")
    k = w.steps.index(30)
    assert w.cols[STATS.index("l2")][k] == 30.0 and w.shapes[k] == ()  # from the stored reductions
    loss = cache.series("loss")
    assert loss.cols[STATS.index("nan_count")][16] == 1.0 and loss.cols[STATS.index("inf_count")][22] == 1.0


def test_a_live_job_s_later_requests_read_only_new_steps() -> None:
    inner = InMemoryObjectStore()
    write_collections(inner, CollectionsDoc({"all": Collection("all", include_regex=[".*"])}, 1))
    _write(inner, range(40))
    rec = RecordingObjectStore(inner)
    cache = TensorCache(lambda: rec, poll_interval=0.0)
    first = list(cache.series("loss").steps)
    assert first and first == create_trial(inner, no_marker_timeout=0).tensor("loss").steps()
    _write(inner, range(40, 70))
    write_end_of_training(inner)
    rec.clear()
    both = cache.all_series(["loss", "w"])
    new_files = {g[0] for g in rec.gets if g[0].startswith("events/")}
    # w was never read: all 70 steps; loss: only the steps after the first answer, same files
    assert len(new_files) == 70
    assert [g for g in rec.gets if g[0].startswith("events/") and int(g[0].split("/")[1]) <= first[-1]]
    rec.clear()
    cache.series("loss")
    cache.series("w")
    assert not [g for g in rec.gets if g[0].startswith("events/")]  # nothing new: nothing read
    _same(both[0], _reference(inner, "loss"))
    _same(both[1], _reference(inner, "w"))


def test_a_live_job_s_request_over_many_tensors_refreshes_the_trial_once() -> None:
    inner = InMemoryObjectStore()
    write_collections(inner, CollectionsDoc({"all": Collection("all", include_regex=[".*"])}, 1))
    names = [f"layer{i}/weight" for i in range(50)]

    def write(steps: range) -> None:
        for s in steps:
            with StepWriter(inner, s, "worker_0", ModeKeys.TRAIN, s) as w:
                for n in names:
                    w.add(n, np.float32(s))

    write(range(5))
    rec = RecordingObjectStore(inner)
    cache = TensorCache(lambda: rec, poll_interval=0.0)
    cache.all_series(names)
    write(range(5, 10))  # the job is still running: no end marker
    rec.clear()
    got = cache.all_series(names)
    # One refresh for the request (a listing or two, one end-marker check), not one per tensor.
    assert rec.calls["list"] <= 3 and rec.calls["exists"] <= 2, dict(rec.calls)
    assert all(s.steps == list(range(10)) for s in got)
