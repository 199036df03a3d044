"""Damaged files never crash the reader; the fetch path reads each record exactly."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from murphy.exceptions import CorruptRecord, TruncatedRecord
from murphy.storage import InMemoryObjectStore
from murphy.storage.base import ObjectStore
from murphy.storage.recording import RecordingObjectStore
from murphy.tensorio.locations import event_file_key, index_file_key
from murphy.trial import create_trial

from .conftest import end, tval, write_colls, write_step

NAMES = [f"layer{i}.weight" for i in range(12)]


def _trial_data(store: ObjectStore, steps: int = 4) -> None:
    write_colls(store)
    for s in range(steps):
        write_step(store, s, {n: tval(n, s) for n in NAMES})


def test_corrupt_index_is_skipped(store: ObjectStore, caplog: pytest.LogCaptureFixture) -> None:
    _trial_data(store)
    store.put(index_file_key(1), b'{"meta": {"mode": "TRAIN", "mode_st')
    end(store)
    with caplog.at_level(logging.WARNING, logger="murphy.trial"):
        trial = create_trial(store)
    assert trial.steps() == [0, 2, 3]
    assert any("corrupt index" in r.getMessage() for r in caplog.records)
    np.testing.assert_array_equal(trial.tensor(NAMES[0]).value(2), tval(NAMES[0], 2))


def test_corrupt_index_of_live_job_is_given_up(store: ObjectStore) -> None:
    _trial_data(store, 2)
    store.put(index_file_key(2), b"not json")
    trial = create_trial(store, poll_interval=0.0)
    for _ in range(5):
        trial.refresh()
    assert trial.steps() == [0, 1]
    write_step(store, 3, {"x": 1.0})
    trial.refresh()
    assert trial.steps() == [0, 1, 3]


def test_corrupt_record_fails_only_that_value(store: ObjectStore) -> None:
    _trial_data(store)
    end(store)
    trial = create_trial(store)
    t0, t1 = trial.tensor(NAMES[0]), trial.tensor(NAMES[1])
    key = event_file_key(1)
    data = bytearray(store.get(key))
    data[8] ^= 0xFF  # the first record's length checksum
    store.put(key, bytes(data))
    with pytest.raises(CorruptRecord) as info:
        t0.value(1)
    assert NAMES[0] in str(info.value) and "step 1" in str(info.value)
    np.testing.assert_array_equal(t1.value(1), tval(NAMES[1], 1))  # the next record is fine
    np.testing.assert_array_equal(t0.value(2), tval(NAMES[0], 2))


def test_truncated_events_file(store: ObjectStore) -> None:
    _trial_data(store)
    end(store)
    key = event_file_key(2)
    data = store.get(key)
    store.put(key, data[: len(data) // 2])
    trial = create_trial(store)
    with pytest.raises(TruncatedRecord):
        trial.tensor(NAMES[-1]).value(2)
    np.testing.assert_array_equal(trial.tensor(NAMES[0]).value(2), tval(NAMES[0], 2))
    # Reading the rest of that step (whole-file path) keeps failing cleanly, never crashing.
    outcomes = []
    for n in NAMES:
        try:
            np.testing.assert_array_equal(trial.tensor(n).value(2), tval(n, 2))
            outcomes.append("ok")
        except TruncatedRecord:
            outcomes.append("cut")
    assert outcomes[0] == "ok" and outcomes[-1] == "cut"
    assert outcomes == sorted(outcomes, reverse=True)  # a prefix reads, the cut-off tail fails


def counting_store() -> RecordingObjectStore:
    """A store that records gets, to check the whole-file reads."""
    return RecordingObjectStore(InMemoryObjectStore())


def _event_gets(store: RecordingObjectStore) -> int:
    return sum(1 for k, _, _ in store.gets if k.startswith("events/"))


def test_many_tensors_of_one_step_cost_two_gets() -> None:
    store = counting_store()
    _trial_data(store, 3)
    end(store)
    trial = create_trial(store)
    store.gets.clear()
    for n in NAMES:
        np.testing.assert_array_equal(trial.tensor(n).value(1), tval(n, 1))
    assert _event_gets(store) == 2  # one ranged read, then the whole file once


@pytest.mark.parametrize("order", ["step-major", "tensor-major"])
def test_every_value_reads_correctly_under_cache_pressure(order: str) -> None:
    store = counting_store()
    _trial_data(store, 6)
    end(store)
    trial = create_trial(store)
    trial._fetcher._cache_bytes = len(store.get(event_file_key(0))) * 2  # room for two files
    store.gets.clear()
    pairs = [(n, s) for s in range(6) for n in NAMES]
    if order == "tensor-major":
        pairs = [(n, s) for n in NAMES for s in range(6)]
    for n, s in pairs:
        np.testing.assert_array_equal(trial.tensor(n).value(s), tval(n, s))
    # Each file is fetched whole at most once, so never more than ~2x one get per value.
    whole = sum(1 for k, st, ln in store.gets if k.startswith("events/") and ln is None)
    assert whole <= 6
    assert _event_gets(store) <= len(pairs) + 6
