"""Many steps sharing index tables and record layouts: the bulk listing and the decoder's fast
path must give the same answers as one-by-one reading."""

from __future__ import annotations

import numpy as np

from murphy.core.modes import ModeKeys
from murphy.storage.base import ObjectStore
from murphy.tensorio.reader import read_event_file
from murphy.trial import create_trial

from .conftest import end, tval, write_colls, write_step


def _names(step: int) -> list[str]:
    # "b" is skipped every third step, "c" appears from step 20: tables change and come back
    return ["a"] + (["b"] if step % 3 else []) + (["c"] if step >= 20 else [])


def test_shared_tables_and_fast_path_match_the_files(store: ObjectStore) -> None:
    write_colls(store)
    for s in range(0, 140, 1):
        write_step(store, s, {n: tval(n, s) for n in _names(s)}, mode=ModeKeys.TRAIN, mode_step=s,
                   reductions={"a": {("max", False): np.float32(s)}} if s % 7 == 0 else None)
    end(store)
    trial = create_trial(store, poll_interval=0.0, end_delay=0.0)
    assert trial.steps() == list(range(140))
    assert trial.tensor_names() == ["a", "b", "c"]
    assert trial.tensor_names(step=3) == ["a"] and trial.tensor_names(step=25) == ["a", "b", "c"]
    assert trial.tensor("b").steps() == [s for s in range(140) if s % 3]
    assert trial.tensor("c").steps(mode=ModeKeys.TRAIN) == list(range(20, 140))
    for name in ("a", "b", "c"):
        t = trial.tensor(name)
        for s in t.steps():
            np.testing.assert_array_equal(t.value(s), tval(name, s))
    assert trial.tensor("a").reduction_value(14, "max") == np.float32(14)
    # every value equals what the generic file reader decodes
    for s in (0, 9, 10, 99, 100, 128, 139):
        key = f"events/{s:012d}/{s:012d}_worker_0.tfevents"
        for ev in read_event_file(store, key):
            if not ev.name.startswith("smdebug/"):
                np.testing.assert_array_equal(trial.tensor(ev.name).value(s), ev.value)
                assert trial.tensor(ev.name).value(s).dtype == ev.value.dtype



def test_write_order_is_the_order_the_hook_wrote(store: ObjectStore) -> None:
    write_colls(store)
    write_step(store, 0, {"zeta": 1.0, "alpha": 2.0, "gradient/mid": 3.0})
    write_step(store, 1, {"gradient/mid": 3.0, "zeta": 1.0}, reductions={"alpha": {("max", False): 5.0}})
    end(store)
    trial = create_trial(store)
    assert trial.write_order(0) == ["zeta", "alpha", "gradient/mid"]
    # a reductions-only tensor takes the place of its first reduction record
    assert trial.write_order(1) == ["gradient/mid", "zeta", "alpha"]
    assert trial.write_order(7) == []
