"""A saved XGBoost round of Python-float metrics (XGBoostBackend: the float is its own snapshot)
writes what the general numpy path writes, and the collections file is the document's JSON."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if os.environ.get("CI"):
    import xgboost  # noqa: F401
else:
    pytest.importorskip("xgboost")

from murphy.core.collection import (
    NON_HISTOGRAM_COLLECTIONS,
    NON_REDUCTION_COLLECTIONS,
    Collection,
    CollectionsDoc,
)
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig
from murphy.hook.base import BaseHook
from murphy.hook.collections import HookCollections, collections_json_bytes
from murphy.hook.xgboost import Hook
from murphy.storage.local import LocalObjectStore
from murphy.tensorio.reader import read_event_file


def _log(rounds: int, as_numpy: bool) -> list[dict[str, Any]]:
    out = []
    for r in range(rounds):
        train, val = 0.7 - r / 100, 0.72 - r / 120
        box = np.float64 if as_numpy else float
        out.append({"train": {"logloss": [box(train)], "auc": [box(0.5 + r / 100)]},
                    "validation": {"logloss": [box(val)]}})
    return out


def _run(out: Path, as_numpy: bool, **kw: Any) -> None:
    hook = Hook(out_dir=str(out), **kw)
    for epoch, log in enumerate(_log(25, as_numpy)):
        hook.after_iteration(None, epoch, log)
    hook.close()


def _records(out: Path) -> dict[str, list[tuple[Any, ...]]]:
    store = LocalObjectStore(out)
    files: dict[str, list[tuple[Any, ...]]] = {}
    for key in store.list("events/"):
        files[key] = [(e.name, e.value.dtype.str, e.value.shape, e.value.tolist(), e.step, e.mode, e.mode_step)
                      for e in read_event_file(store, key)]
    return files


@pytest.mark.parametrize("kw", [{}, {"include_collections": ["metrics", "losses"]},
                                {"save_config": SaveConfig(save_interval=3), "include_collections": ["losses"]}])
def test_float_metrics_write_what_numpy_scalars_write(tmp_path: Path, kw: dict[str, Any]) -> None:
    _run(tmp_path / "float", as_numpy=False, **kw)
    _run(tmp_path / "numpy", as_numpy=True, **kw)
    fast, general = _records(tmp_path / "float"), _records(tmp_path / "numpy")
    assert fast and fast == general
    assert all(rec[1] == "<f8" and rec[2] == (1,) for recs in fast.values() for rec in recs)
    a, b = LocalObjectStore(tmp_path / "float"), LocalObjectStore(tmp_path / "numpy")
    keys = sorted(k for k in a.list("") if not k.startswith("events/"))
    assert keys == sorted(k for k in b.list("") if not k.startswith("events/"))
    for key in keys:  # index files, collections file, manifest segment, end marker
        assert a.get(key) == b.get(key), key


def _expected_doc(colls: HookCollections, num_workers: int) -> CollectionsDoc:
    """The collections file as the document model builds it (the oracle of the fast serialiser):
    every collection with its effective configs, smdebug's rule for scalar and summary ones."""
    out = {}
    for name, coll in colls.collections.items():
        raw_only = name in NON_REDUCTION_COLLECTIONS
        out[name] = Collection(
            name, include_regex=coll.include_regex, tensor_names=coll.tensor_names,
            reduction_config=ReductionConfig(save_raw_tensor=True) if raw_only else coll.reduction_config or colls.reduction_config,
            save_config=colls.effective_save_config(name),
            save_histogram=coll.save_histogram and name not in NON_HISTOGRAM_COLLECTIONS)
    return CollectionsDoc(collections=out, num_workers=num_workers)


def test_the_collections_file_is_the_documents_json(tmp_path: Path) -> None:
    hook = BaseHook(out_dir=str(tmp_path / "a"), reduction_config=ReductionConfig(reductions=["mean"]),
                    include_collections=["weights", "custom"], save_config=SaveConfig(save_interval=7))
    hook.get_collection("custom").include("^x")
    hook.get_collection("custom").save_config = SaveConfig(save_steps=[1, 2])
    hook.get_collection("custom").reduction_config = ReductionConfig(norms=["l2"], save_shape=True)
    hook.get_collection("weights").add_tensor_name("fc.weight")
    hook.get_collection("custom").add_tensor_name('qu"o\\te ünï\t☃')  # escaped as json.dumps escapes
    hook.get_collection("custom").include(r"^y\d+$")
    hook.get_collection("custom").save_histogram = False
    hook.get_collection("losses").reduction_config = ReductionConfig(reductions=["max"])  # ignored: scalars are raw
    for workers in (1, 4):
        data = collections_json_bytes(hook.collections, workers)
        assert data == _expected_doc(hook.collections, workers).to_json_bytes()
        read = CollectionsDoc.from_json_bytes(data).collections  # what the trial's reader makes of it
        assert read["custom"].save_config == SaveConfig(save_steps=[1, 2]).merge_default(SaveConfig(save_interval=7))
        assert read["losses"].reduction_config == ReductionConfig(save_raw_tensor=True)
    xgb_hook = Hook(out_dir=str(tmp_path / "b"), include_collections=["feature_importance", "trees"])
    assert collections_json_bytes(xgb_hook.collections, 1) == _expected_doc(xgb_hook.collections, 1).to_json_bytes()
    hook.close()
    xgb_hook.close()


def test_a_replayed_round_notices_new_metrics_collection_changes_and_non_floats(tmp_path: Path) -> None:
    hook = Hook(out_dir=str(tmp_path))
    log: dict[str, Any] = {"train": {"logloss": [0.5]}}
    for epoch in range(21):  # rounds 0, 10 and 20 saved: the plan is replayed at 10 and 20
        hook.after_iteration(None, epoch, log)
    log["validation"] = {"error": [0.25]}  # a metric appears: decided again, and saved
    for epoch in range(21, 31):
        hook.after_iteration(None, epoch, log)
    hook.get_collection("metrics").save_config = SaveConfig(save_steps=[35])  # takes effect at once
    log["train"]["logloss"] = [np.float32(0.125)]  # not a Python float: the general path
    for epoch in range(31, 41):
        hook.after_iteration(None, epoch, log)
    hook.close()
    events = _records(tmp_path)
    steps = {key.split("/")[1]: {rec[0]: rec for rec in recs} for key, recs in events.items()}
    assert sorted(int(s) for s in steps) == [0, 10, 20, 30, 35]
    assert set(steps["000000000020"]) == {"train-logloss"}
    assert set(steps["000000000030"]) == {"train-logloss", "validation-error"}
    assert steps["000000000035"]["train-logloss"][1:4] == ("<f4", (1,), [0.125])


def test_a_float_step_in_one_pass_is_the_step_writers_step(tmp_path: Path) -> None:
    from murphy.core.modes import ModeKeys
    from murphy.tensorio.writer import StepWriter, write_float_step

    items = [("train-logloss", 0.5), ("validation-logloss", 0.25), ("validation_0-auc", 0.75)]
    one, two = LocalObjectStore(tmp_path / "one"), LocalObjectStore(tmp_path / "two")
    key, data = write_float_step(one, 20, "worker_0", ModeKeys.TRAIN, 7, items)
    writer = StepWriter(two, 20, "worker_0", ModeKeys.TRAIN, 7, stream=True)
    for name, value in items:
        writer.add(name, np.array([value]))
    writer.close()
    assert key == writer.index_file_name and data == writer.index_bytes == two.get(key) == one.get(key)
    assert _records(tmp_path / "one") == _records(tmp_path / "two")


def _fs_calls(monkeypatch: pytest.MonkeyPatch, root: Path) -> list[str]:
    """Every file-system call the hook makes from now on, as ``call relative-path``."""
    calls: list[str] = []
    paths: dict[int, str] = {}

    def rel(p: Any) -> str:  # a temp name without its unique suffix
        return re.sub(r"\.\d+-\d+\.tmp$", "", os.path.relpath(os.fspath(p), root))

    def spy(name: str) -> None:
        real = getattr(os, name)

        def call(*a: Any, **k: Any) -> Any:
            if name == "open":
                fd = real(*a, **k)
                paths[fd] = rel(a[0])
                calls.append(f"open {paths[fd]}")
                return fd
            what = paths.get(a[0], "?") if name in ("write", "writev", "close") and isinstance(a[0], int) else rel(a[0])
            calls.append(f"{name} {what}")
            return real(*a, **k)

        monkeypatch.setattr(os, name, call)

    for name in ("mkdir", "makedirs", "open", "write", "writev", "close", "replace", "rename", "stat", "lstat", "unlink"):
        spy(name)
    return calls


def test_a_saved_default_round_makes_only_the_layouts_file_system_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    hook = Hook(out_dir=str(out))
    log = _log(41, as_numpy=False)
    for epoch in range(21):
        hook.after_iteration(None, epoch, log[epoch])
    calls = _fs_calls(monkeypatch, out)
    for epoch in range(21, 30):  # quiet rounds (the collections file went at round 1): nothing
        hook.after_iteration(None, epoch, log[epoch])
    assert calls == []
    hook.after_iteration(None, 30, log[30])
    events, index = "events/000000000030/000000000030_worker_0.tfevents", "index/000000000/000000000030_worker_0.json"
    # The step's directory, then each file written once under a temp name and renamed into place.
    assert calls == ["mkdir events/000000000030",
                     f"open {events}", f"write {events}", f"close {events}", f"replace {events}",
                     f"open {index}", f"write {index}", f"close {index}", f"replace {index}"]
    calls.clear()
    for epoch in range(31, 40):
        hook.after_iteration(None, epoch, log[epoch])
    assert calls == []
    monkeypatch.undo()
    hook.close()


def test_a_default_runs_directories_are_made_once_each_and_nothing_is_statted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    calls = _fs_calls(monkeypatch, out)
    hook = Hook(out_dir=str(out))
    for epoch, log in enumerate(_log(100, as_numpy=False)):
        hook.after_iteration(None, epoch, log)
    hook.close()
    monkeypatch.undo()
    # Construction asks whether the run already ended; the first save lists stale manifest segments.
    assert [c for c in calls if c.startswith(("stat", "lstat"))] == ["stat training_job_end.ts",
                                                                     "stat murphy-manifest/index/worker_0"]
    mkdirs = [c.split()[1] for c in calls if c.startswith("mkdir")]
    made = sorted(os.path.relpath(d, out) for d, _, _ in os.walk(out))
    # The trial root's first directory is looked for upwards once (two misses), then each made once.
    assert sorted(mkdirs) == sorted([*made, "events", "events/000000000000"])
    assert not [c for c in calls if c.startswith(("makedirs", "writev", "unlink"))]


def test_a_replayed_metrics_round_runs_no_general_encoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import murphy.tensorio.writer as step_writer

    hook = Hook(out_dir=str(tmp_path))
    logs = _log(100, as_numpy=False)
    for epoch in range(21):  # rounds 0, 10, 20: a one- and a two-digit step learnt
        hook.after_iteration(None, epoch, logs[epoch])
    used: list[str] = []
    # Every module that encodes records for the hook's writer (float_step: FloatSteps).
    for module in (sys.modules.get("murphy.tensorio.float_step"), step_writer):
        if module is not None and hasattr(module, "encode_tensor_event_parts"):
            monkeypatch.setattr(module, "encode_tensor_event_parts", lambda name, *a, **k: used.append(name))
    for epoch in range(21, 100):
        hook.after_iteration(None, epoch, logs[epoch])
    monkeypatch.undo()
    hook.close()
    assert used == []
    assert len(_records(tmp_path)) == 10


def test_the_round_after_a_save_starts_the_quiet_stretch_without_the_full_path(tmp_path: Path) -> None:
    hook = Hook(out_dir=str(tmp_path))
    full: list[int] = []
    after = hook._after_iteration

    def counted(model: Any, epoch: int, evals_log: Any) -> None:
        full.append(epoch)
        after(model, epoch, evals_log)

    hook._after_iteration = counted  # type: ignore[method-assign]
    logs = _log(100, as_numpy=False)
    for epoch in range(31):
        hook.after_iteration(None, epoch, logs[epoch])
        if epoch in (11, 21):
            assert (hook.step, hook.mode_step, hook._saving, hook._due) == (epoch, epoch, False, frozenset())
    # Round 1 writes the collections file; 11 and 21 only move the counters (as 2..9 do).
    assert full == [0, 1, 10, 20, 30]
    # Anything that could change the round after a save still takes the full path there.
    hook.save_scalar("lr", 0.5)
    hook.after_iteration(None, 31, logs[31])
    hook.after_iteration(None, 40, logs[40])  # a jump: the full path
    hook.get_collection("metrics").save_config = SaveConfig(save_interval=3)
    for epoch in range(41, 46):
        hook.after_iteration(None, epoch, logs[epoch])
    assert full == [0, 1, 10, 20, 30, 31, 40, 41, 42, 45]
    hook.close()
    steps = sorted({int(k.split("/")[1]) for k in _records(tmp_path)})
    assert steps == [0, 10, 20, 30, 40, 42, 45]
    scalar_steps = [e[4] for recs in _records(tmp_path).values() for e in recs if e[0] == "scalar/lr"]
    assert scalar_steps == [30]


def test_saved_rounds_hash_no_mode_and_write_floats_without_the_writers_general_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from murphy.core.modes import ModeKeys
    from murphy.hook.xgboost_io import InlineWriter

    hook = Hook(out_dir=str(tmp_path))
    logs = _log(100, as_numpy=False)
    for epoch in range(21):
        hook.after_iteration(None, epoch, logs[epoch])
    hashes: list[str] = []
    handled: list[object] = []
    real_hash, real_handle = ModeKeys.__hash__, InlineWriter._handle
    monkeypatch.setattr(ModeKeys, "__hash__", lambda m: hashes.append(m.name) or real_hash(m))
    monkeypatch.setattr(InlineWriter, "_handle", lambda w, item: handled.append(item) or real_handle(w, item))
    for epoch in range(21, 41):
        hook.after_iteration(None, epoch, logs[epoch])
    monkeypatch.undo()
    # A ModeKeys' hash is a Python call: only the save config's own lookup per saved round (30, 40).
    assert len(hashes) <= 2
    assert handled == []
    hook.close()
    assert sorted({int(k.split("/")[1]) for k in _records(tmp_path)}) == [0, 10, 20, 30, 40]
