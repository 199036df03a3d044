"""Names, steps, values, modes, reductions and collections through the real writer."""

from __future__ import annotations

import numpy as np
import pytest

from murphy.core.collection import Collection
from murphy.core.modes import ModeKeys
from murphy.exceptions import (
    ShapeUnavailableForStep,
    SMDebugValueError,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from murphy.storage.base import ObjectStore
from murphy.trial import StepState, create_trial, numpy_reduction

from .conftest import end, tval, write_colls, write_step

NAMES = ("Net_fc1.weight", "Net_fc1.bias", "CrossEntropyLoss_output_0")


def _simple(store: ObjectStore, steps: range = range(5)) -> None:
    write_colls(store)
    for s in steps:
        write_step(store, s, {n: tval(n, s) for n in NAMES})


def test_names_steps_values(store: ObjectStore) -> None:
    _simple(store)
    end(store)
    trial = create_trial(store)
    assert trial.loaded_all_steps
    assert trial.steps() == [0, 1, 2, 3, 4]
    assert trial.tensor_names() == sorted(NAMES)
    assert trial.tensor_names(step=3) == sorted(NAMES)
    assert trial.workers() == ["worker_0"]
    assert trial.num_workers == 1
    assert trial.last_complete_step == 4
    assert trial.modes() == []
    for n in NAMES:
        t = trial.tensor(n)
        assert t.steps() == [0, 1, 2, 3, 4]
        for s in t.steps():
            v = t.value(s)
            assert v.dtype == np.float32
            np.testing.assert_array_equal(v, tval(n, s))
        assert t.workers(2) == ["worker_0"]
        assert t.shape(1) == (3, 4)
    values = trial.tensor(NAMES[0]).values()
    assert sorted(values) == [0, 1, 2, 3, 4]
    assert trial.tensor(NAMES[0]).prev_steps(3, 2) == [2, 3]
    assert trial.tensor(NAMES[0]).prev_steps(3) == [0, 1, 2, 3]
    assert trial.has_tensor(NAMES[1]) and not trial.has_tensor("nope")
    with pytest.raises(TensorUnavailable):
        trial.tensor("nope")


def test_path_uri_and_name(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from murphy.storage import LocalObjectStore

    root = tmp_path / "job-1" / "debug-output"
    _simple(LocalObjectStore(root), range(2))
    end(LocalObjectStore(root))
    by_path = create_trial(str(root))
    by_uri = create_trial(root.as_uri(), name="x", profiler=False, output_dir="/ignored")
    assert by_path.name == "debug-output" and by_uri.name == "x"
    assert by_path.path == str(root)
    assert by_path.steps() == by_uri.steps() == [0, 1]


def test_memory_uri() -> None:
    from murphy.storage import open_store

    store = open_store("memory://trial-test-memory-uri/run")
    _simple(store, range(3))
    end(store)
    assert create_trial("memory://trial-test-memory-uri/run").steps() == [0, 1, 2]


def test_modes_mapping(store: ObjectStore) -> None:
    """TRAIN mode steps 0..11 at global [0,1,3,4,...,16]; EVAL 0..5 at [2,5,...,17]."""
    write_colls(store)
    counters = {ModeKeys.TRAIN: 0, ModeKeys.EVAL: 0}
    for g in range(18):
        mode = ModeKeys.EVAL if g % 3 == 2 else ModeKeys.TRAIN
        write_step(store, g, {"loss": np.float32(g)}, mode=mode, mode_step=counters[mode])
        counters[mode] += 1
    end(store)
    trial = create_trial(store)
    assert trial.steps() == list(range(18))
    assert trial.steps(ModeKeys.TRAIN) == list(range(12))
    assert trial.steps(ModeKeys.EVAL) == list(range(6))
    assert trial.modes() == [ModeKeys.TRAIN, ModeKeys.EVAL]
    assert [trial.global_step(ModeKeys.TRAIN, s) for s in range(12)] == [0, 1, 3, 4, 6, 7, 9, 10, 12, 13, 15, 16]
    assert [trial.global_step(ModeKeys.EVAL, s) for s in range(6)] == [2, 5, 8, 11, 14, 17]
    assert trial.global_step(ModeKeys.EVAL, 6) is None
    assert trial.mode(5) is ModeKeys.EVAL and trial.mode_step(5) == 1
    assert trial.mode_modestep(4) == (ModeKeys.TRAIN, 3)
    assert trial.mode_modestep(99) == (None, None)
    t = trial.tensor("loss")
    assert t.steps(ModeKeys.EVAL) == list(range(6))
    assert t.steps(ModeKeys.PREDICT) == []
    assert float(t.value(1, mode=ModeKeys.EVAL)) == 5.0
    assert float(t.value(5, mode=ModeKeys.TRAIN)) == 7.0
    assert t.value(5).shape == ()  # a 0-d scalar stays 0-d
    assert trial.tensor_names(step=1, mode=ModeKeys.EVAL) == ["loss"]
    assert trial.tensor_names(mode=ModeKeys.EVAL) == ["loss"]
    assert trial.tensor_names(mode=ModeKeys.PREDICT) == []
    assert trial.has_passed_step(3, ModeKeys.EVAL) is StepState.AVAILABLE


def test_reductions_folded(store: ObjectStore) -> None:
    write_colls(store)
    raw = np.array([[1.0, -2.0], [3.0, -4.0]], dtype=np.float32)
    write_step(
        store,
        0,
        {"w": raw},
        reductions={
            "w": {("mean", False): np.float32(42.0)},  # deliberately not the real mean
            "g": {("l2", False): np.float32(5.0), ("max", True): np.float32(7.0)},
        },
    )
    end(store)
    trial = create_trial(store)
    assert trial.tensor_names() == ["g", "w"]  # no smdebug/reductions/ prefix
    assert trial.tensor_names(show_prefixed_tensors=True) == ["g", "w"]
    w, g = trial.tensor("w"), trial.tensor("g")
    assert float(w.reduction_value(0, "mean")) == 42.0  # stored value wins
    assert float(w.reduction_value(0, "max", abs=True)) == 4.0  # computed from raw
    assert float(w.reduction_value(0, "l1")) == 10.0
    assert float(w.reduction_value(0, "l2_norm")) == pytest.approx(np.sqrt(30.0))
    assert float(w.reduction_value(0, "variance")) == pytest.approx(float(np.var(raw)))
    assert set(w.reduction_values(0)) == {("mean", False)}
    assert {k: float(v) for k, v in g.reduction_values(0).items()} == {("l2", False): 5.0, ("max", True): 7.0}
    with pytest.raises(TensorUnavailableForStep) as info:
        g.value(0)
    assert info.value.has_reductions
    with pytest.raises(TensorUnavailableForStep):
        g.reduction_value(0, "min")
    with pytest.raises(ShapeUnavailableForStep):
        g.shape(0)
    with pytest.raises(SMDebugValueError):
        w.reduction_value(0, "median")


def test_numpy_reduction_helper() -> None:
    a = np.array([-3.0, 4.0])
    assert float(numpy_reduction("l2", a)) == 5.0
    assert float(numpy_reduction("min", a, abs_=True)) == 3.0
    assert float(numpy_reduction("prod", a)) == -12.0


def test_saved_shapes(store: ObjectStore) -> None:
    write_colls(store)
    write_step(store, 0, {}, reductions={"big": {("mean", False): 1.0}}, shapes={"big": (1000, 10)})
    end(store)
    trial = create_trial(store)
    assert trial.tensor("big").shape(0) == (1000, 10)
    assert trial.tensor("big").original_name == "big"


def test_collections_filter(store: ObjectStore) -> None:
    weights = Collection("weights", include_regex=["^(?!gradient).*weight"])
    losses = Collection("losses", tensor_names=["my_loss"])
    write_colls(store, collections=[weights, losses, Collection("default")])
    names = ["Net_fc1.weight", "Net_fc2.weight", "gradient/Net_fc1.weight", "my_loss", "Net_fc1.bias"]
    write_step(store, 0, {n: np.ones(2, np.float32) for n in names})
    write_step(store, 1, {"Net_fc1.weight": np.ones(2, np.float32)})
    end(store)
    trial = create_trial(store)
    assert set(trial.collections()) == {"weights", "losses", "default"}
    assert trial.collection("weights").include_regex == ["^(?!gradient).*weight"]
    assert trial.tensor_names(collection="weights") == ["Net_fc1.weight", "Net_fc2.weight"]
    assert trial.tensor_names(collection=losses) == ["my_loss"]
    assert trial.tensor_names(collection="weights", step=1) == ["Net_fc1.weight"]
    assert trial.tensor_names(regex="bias") == ["Net_fc1.bias"]
    assert trial.tensor_names(regex=["^gradient", "loss$"]) == ["gradient/Net_fc1.weight", "my_loss"]
    with pytest.raises(ValueError):
        trial.tensor_names(regex="x", collection="weights")
    # smdebug's CollectionManager.get creates an unknown collection (empty), and lists it after.
    nope = trial.collection("nope")
    assert (nope.name, nope.tensor_names, nope.include_regex) == ("nope", set(), [])
    assert "nope" in trial.collections() and trial.collection("nope") is nope
    assert trial.tensor_names(collection="nope") == []


ALL_DTYPES = [
    np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128,
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips(tmp_path, dtype) -> None:  # type: ignore[no-untyped-def]
    from murphy.storage import LocalObjectStore

    store = LocalObjectStore(tmp_path)
    write_colls(store)
    value = (np.arange(-3, 9).reshape(3, 4) % 7).astype(dtype)
    if np.dtype(dtype).kind == "c":
        value = value + 1j * value
    write_step(store, 0, {"t": value, "scalar": np.asarray(value.flat[1])})
    end(store)
    trial = create_trial(store)
    got = trial.tensor("t").value(0)
    assert got.dtype == np.dtype(dtype) and got.shape == (3, 4)
    np.testing.assert_array_equal(got, value)
    assert trial.tensor("scalar").value(0).shape == ()


def test_strings_round_trip(store: ObjectStore) -> None:
    write_colls(store)
    write_step(store, 0, {"s": np.array(["a", "bé", ""])})
    end(store)
    got = create_trial(store).tensor("s").value(0)
    assert [x.decode() if isinstance(x, bytes) else x for x in got.tolist()] == ["a", "bé", ""]


def test_range_steps(store: ObjectStore) -> None:
    _simple(store, range(10))
    end(store)
    trial = create_trial(store, range_steps=(3, 6))
    assert trial.steps() == [3, 4, 5]
    with pytest.raises(SMDebugValueError):
        create_trial(store, range_steps=(6, 3))


def test_value_cache_flag(store: ObjectStore) -> None:
    _simple(store, range(2))
    end(store)
    trial = create_trial(store, cache=True)
    a = trial.tensor(NAMES[0]).value(1)
    assert trial.tensor(NAMES[0]).value(1) is a
