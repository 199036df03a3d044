from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from murphy.core.collection import Collection, CollectionsDoc
from murphy.core.modes import ModeKeys
from murphy.exceptions import CorruptRecord, ObjectNotFound, SMDebugRuntimeError, TruncatedRecord
from murphy.storage import InMemoryObjectStore, LocalObjectStore, ObjectStore
from murphy.storage.recording import RecordingObjectStore
from murphy.tensorio import locations as loc
from murphy.tensorio.reader import (
    read_collections,
    read_event_file,
    read_index,
    read_tensor_record,
)
from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training


@pytest.fixture(params=["memory", "local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "memory":
        return InMemoryObjectStore()
    return LocalObjectStore(tmp_path / "trial")


def test_step_round_trip_through_the_index(store: ObjectStore) -> None:
    rec = RecordingObjectStore(store)
    weights = np.arange(12, dtype=np.float32).reshape(3, 4)
    with StepWriter(rec, 1234, "worker_1", ModeKeys.TRAIN, 17) as w:
        w.add("Net_fc1.weight", weights)
        assert w.add("empty", np.zeros((0, 3))) is None
        w.add("loss", np.array(0.5, dtype=np.float32), shape_of=())
        w.add("bf", np.array([0x4000], dtype=np.uint16), original_dtype="bfloat16")
        weights[:] = -1  # the writer copied at add()
    assert rec.puts == [loc.event_file_key(1234, "worker_1"), loc.index_file_key(1234, "worker_1")]
    idx = read_index(store, loc.index_file_key(1234, "worker_1"))
    assert (idx.mode, idx.mode_step, idx.event_file_name) == (ModeKeys.TRAIN, 17, loc.event_file_key(1234, "worker_1"))
    assert [e.tensorname for e in idx.tensors] == ["Net_fc1.weight", "loss", "bf"]
    assert [s.shape for s in idx.shapes] == [()]
    assert sum(e.length for e in idx.tensors) == len(store.get(idx.event_file_name))
    values = {}
    for e in idx.tensors:
        ev = read_tensor_record(store, idx.event_file_name, e.start_idx, e.length)
        assert (ev.name, ev.step, ev.mode, ev.mode_step) == (e.tensorname, 1234, ModeKeys.TRAIN, 17)
        values[ev.name] = ev
    assert np.array_equal(values["Net_fc1.weight"].value, np.arange(12, dtype=np.float32).reshape(3, 4))
    assert values["loss"].value.shape == ()
    assert values["bf"].original_dtype == "bfloat16" and values["bf"].value.tolist() == [2.0]
    assert [ev.name for ev in read_event_file(store, idx.event_file_name)] == ["Net_fc1.weight", "loss", "bf"]


def test_nothing_is_written_for_an_empty_step(store: ObjectStore) -> None:
    w = StepWriter(store, 5)
    w.add("empty", np.array([]))
    w.close()
    assert list(store.list()) == []
    w.close()  # idempotent
    with pytest.raises(SMDebugRuntimeError):
        w.add("x", 1.0)


def test_shapes_only_step_writes_only_an_index(store: ObjectStore) -> None:
    with StepWriter(store, 2, mode=ModeKeys.EVAL, mode_step=0) as w:
        w.add_shape("x", [2, 3], original_name="x:0")
    assert list(store.list()) == [loc.index_file_key(2)]
    assert read_index(store, loc.index_file_key(2)).shapes[0].originalname == "x:0"


def test_collections_and_end_marker(store: ObjectStore) -> None:
    doc = CollectionsDoc({"losses": Collection("losses", include_regex=["loss"])}, num_workers=2)
    key = write_collections(store, doc, "worker_1")
    assert key == "collections/000000000/worker_1_collections.json"
    assert read_collections(store, key).to_json_bytes() == doc.to_json_bytes()
    write_end_of_training(store)
    assert store.get("training_job_end.ts") == b""


def test_reader_errors(store: ObjectStore) -> None:
    with StepWriter(store, 1) as w:
        e1 = w.add("a", np.ones(4))
        e2 = w.add("b", np.ones(4))
    assert e1 is not None and e2 is not None
    key = loc.event_file_key(1)
    with pytest.raises(ObjectNotFound):
        read_tensor_record(store, loc.event_file_key(2), 0, 10)
    with pytest.raises(TruncatedRecord):
        read_tensor_record(store, key, e2.start_idx, e2.length + 5)  # runs past the end of the file
    with pytest.raises(CorruptRecord):
        read_tensor_record(store, key, 1, e1.length)  # wrong offset
    data = store.get(key)
    store.put(key, data[: e2.start_idx + 20])  # in-progress write
    assert [ev.name for ev in read_event_file(store, key)] == ["a"]
