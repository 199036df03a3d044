"""The shortcuts a saved XGBoost round takes write exactly the bytes of the general code:
a Python float's record is np.array([value])'s, the index file is json.dumps of its object, and
the local store makes a new step directory with one mkdir (and again after it is deleted)."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.storage.local import LocalObjectStore
from murphy.tensorio.events import decode_tensor_event, encode_tensor_event
from murphy.tensorio.index import IndexEntry, ShapeEntry, StepIndex

NAMES = ["train-logloss", "validation_0-auc", 'quo"te', "back\\slash", "ünï☃", "tab\tnl\n", "\U0001f600", ""]


@pytest.mark.parametrize("seed", range(200))
def test_a_float_record_is_the_float64_array_record(seed: int) -> None:
    r = random.Random(seed)
    value = r.choice([0.0, -0.0, 1.5, math.nan, math.inf, -math.inf, r.random() * 10.0 ** r.randrange(-300, 300)])
    kw = {"step": r.choice([0, 1, 127, 128, 10**10]), "mode": r.choice(list(ModeKeys)),
          "mode_step": r.randrange(10**6), "wall_time": r.random() * 1e9}
    name = r.choice(NAMES) or "x"
    fast = encode_tensor_event(name, value, **kw)  # type: ignore[arg-type]
    assert fast == encode_tensor_event(name, np.array([value]), **kw)  # type: ignore[arg-type]
    event = decode_tensor_event(fast)
    assert event.value.dtype == np.float64 and event.value.shape == (1,)
    assert event.value[0] == value or (math.isnan(value) and math.isnan(event.value[0]))


def test_a_float_with_an_original_dtype_takes_the_general_path() -> None:
    kw = {"step": 3, "mode": ModeKeys.TRAIN, "mode_step": 3, "wall_time": 1.0}
    assert encode_tensor_event("w", 1.5, original_dtype="bfloat16", **kw) == encode_tensor_event(  # type: ignore[arg-type]
        "w", np.array([1.5]), original_dtype="bfloat16", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(300))
def test_the_index_file_is_json_dumps_of_its_object(seed: int) -> None:
    r = random.Random(seed)
    index = StepIndex(
        r.choice(list(ModeKeys)), r.randrange(0, 10**12), r.choice(NAMES) + ".tfevents",
        [IndexEntry(r.choice(NAMES), r.randrange(10**9), r.randrange(1, 10**6)) for _ in range(r.randrange(4))],
        [ShapeEntry(r.choice(NAMES), r.choice(NAMES), tuple(r.randrange(100) for _ in range(r.randrange(4))))
         for _ in range(r.randrange(3))],
    )
    data = index.to_json_bytes()
    assert data == json.dumps(index.to_json_dict()).encode("utf-8")
    assert StepIndex.from_json_bytes(data) == index


def test_a_new_step_directory_is_one_mkdir_and_a_deleted_one_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalObjectStore(tmp_path / "run")
    store.put("events/000000000000/000000000000_worker_0.tfevents", b"a")
    calls: list[str] = []
    real_mkdir, real_stat = os.mkdir, os.stat
    monkeypatch.setattr(os, "mkdir", lambda p, *a, **k: (calls.append(f"mkdir {p}"), real_mkdir(p, *a, **k))[1])
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: (calls.append(f"stat {p}"), real_stat(p, *a, **k))[1])
    store.put("events/000000000010/000000000010_worker_0.tfevents", b"b")  # its parent is known
    assert calls == [f"mkdir {tmp_path / 'run' / 'events' / '000000000010'}"]
    monkeypatch.undo()
    store.put("index/000000000/000000000000_worker_0.json", b"{}")
    assert store.get("events/000000000010/000000000010_worker_0.tfevents") == b"b"
    # Directories the store knows, deleted behind its back: the put makes them again.
    shutil.rmtree(tmp_path / "run")
    store.put("index/000000000/000000000010_worker_0.json", b"{}")
    store.put("events/000000000010/000000000010_worker_0.tfevents", b"c")
    assert store.get("events/000000000010/000000000010_worker_0.tfevents") == b"c"
    assert sorted(store.list("")) == ["events/000000000010/000000000010_worker_0.tfevents",
                                      "index/000000000/000000000010_worker_0.json"]
    assert not [n for n in os.listdir(tmp_path / "run" / "index" / "000000000") if n.endswith(".tmp")]


def test_a_new_trees_directories_are_mkdirs_only_each_made_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook's first files in a fresh out_dir: no stat, and past the first file every missing
    level is one successful mkdir (the trial root and each directory the store made are known)."""
    root = tmp_path / "new" / "run"
    store = LocalObjectStore(root)
    calls: list[str] = []
    real_mkdir, real_stat = os.mkdir, os.stat

    def mkdir(p: str, *a: object, **k: object) -> None:
        try:
            real_mkdir(p, *a, **k)  # type: ignore[arg-type]
        except OSError as e:
            calls.append(f"mkdir {os.path.relpath(p, tmp_path)} {type(e).__name__}")
            raise
        calls.append(f"mkdir {os.path.relpath(p, tmp_path)}")

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: (calls.append(f"stat {p}"), real_stat(p, *a, **k))[1])
    store.put("events/000000000000/000000000000_worker_0.tfevents", b"a")
    # Nothing known yet: upwards until a level is made, then down again.
    assert calls == ["mkdir new/run/events/000000000000 FileNotFoundError", "mkdir new/run/events FileNotFoundError",
                     "mkdir new/run FileNotFoundError", "mkdir new", "mkdir new/run", "mkdir new/run/events",
                     "mkdir new/run/events/000000000000"]
    calls.clear()
    store.put("index/000000000/000000000000_worker_0.json", b"{}")
    store.put("collections/000000000/worker_0_collections.json", b"{}")
    store.put("murphy-manifest/index/worker_0/000000000000_000000000000.seg", b"s")
    store.put("training_job_end.ts", b"")
    store.put("events/000000000010/000000000010_worker_0.tfevents", b"b")
    assert calls == ["mkdir new/run/index", "mkdir new/run/index/000000000", "mkdir new/run/collections",
                     "mkdir new/run/collections/000000000", "mkdir new/run/murphy-manifest",
                     "mkdir new/run/murphy-manifest/index", "mkdir new/run/murphy-manifest/index/worker_0",
                     "mkdir new/run/events/000000000010"]
    monkeypatch.undo()
    assert sorted(store.list("")) == [
        "collections/000000000/worker_0_collections.json", "events/000000000000/000000000000_worker_0.tfevents",
        "events/000000000010/000000000010_worker_0.tfevents", "index/000000000/000000000000_worker_0.json",
        "murphy-manifest/index/worker_0/000000000000_000000000000.seg", "training_job_end.ts"]
    # A known ancestor deleted behind the store's back: the tree is made again.
    shutil.rmtree(root)
    store.put("index/000000000/000000000020_worker_0.json", b"{}")
    store.put("collections/000000000/worker_0_collections.json", b"[]")
    assert store.get("collections/000000000/worker_0_collections.json") == b"[]"


def test_a_put_whose_write_fails_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from murphy.exceptions import StorageError

    store = LocalObjectStore(tmp_path)
    store.put("a/b", b"old")

    def failing_write(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", failing_write)
    with pytest.raises(StorageError, match="cannot write a/b"):
        store.put("a/b", b"new")
    monkeypatch.undo()
    assert store.get("a/b") == b"old"
    assert os.listdir(tmp_path / "a") == ["b"]  # no temp file left


def test_a_directory_that_exists_already_is_written_into(tmp_path: Path) -> None:
    (tmp_path / "events" / "000000000005").mkdir(parents=True)
    store = LocalObjectStore(tmp_path)
    store.put("events/000000000005/000000000005_worker_0.tfevents", b"x")
    assert store.get("events/000000000005/000000000005_worker_0.tfevents") == b"x"


def test_a_file_where_the_directory_should_be_is_a_storage_error(tmp_path: Path) -> None:
    from murphy.exceptions import StorageError

    (tmp_path / "events").write_bytes(b"not a directory")
    with pytest.raises(StorageError):
        LocalObjectStore(tmp_path).put("events/000000000000/000000000000_worker_0.tfevents", b"x")
