"""Completeness, live appearance, end of training, waits and their bounds."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from murphy.exceptions import (
    InvalidWorker,
    MissingCollectionFiles,
    NoMoreData,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
)
from murphy.storage import InMemoryObjectStore
from murphy.storage.base import ObjectStore
from murphy.trial import NoMoreDataTimeout, StepState, create_trial, no_refresh

from .conftest import end, tval, write_colls, write_step


def test_multi_worker_completeness(store: ObjectStore) -> None:
    write_colls(store, workers=["worker_0", "worker_1"])
    for s in range(3):
        write_step(store, s, {"t": tval("t", s)}, worker="worker_0")
    write_step(store, 0, {"t": tval("t", 0, "worker_1")}, worker="worker_1")
    trial = create_trial(store)
    assert trial.num_workers == 2
    assert trial.workers() == ["worker_0", "worker_1"]
    assert trial.steps() == [0]
    assert trial.steps(show_incomplete_steps=True) == [0, 1, 2]
    assert trial.tensor("t").steps() == [0]
    assert trial.has_passed_step(1) is StepState.NOT_YET_AVAILABLE
    assert trial.has_passed_step(0) is StepState.AVAILABLE
    t = trial.tensor("t")
    assert t.workers(0) == ["worker_0", "worker_1"]
    np.testing.assert_array_equal(t.value(0), tval("t", 0, "worker_0"))  # lexically first
    np.testing.assert_array_equal(t.value(0, worker="worker_1"), tval("t", 0, "worker_1"))
    with pytest.raises(InvalidWorker):
        t.value(0, worker="worker_7")
    # An incomplete step still reads (as smdebug): only listing hides it.
    np.testing.assert_array_equal(t.value(1), tval("t", 1))

    write_step(store, 1, {"t": tval("t", 1, "worker_1")}, worker="worker_1")
    trial.refresh()
    assert trial.steps() == [0, 1]
    assert trial.last_complete_step == 1
    end(store)
    trial.refresh()
    assert trial.loaded_all_steps
    assert trial.steps() == [0, 1, 2]
    assert trial.has_passed_step(2) is StepState.AVAILABLE


def test_token_only_advances_to_last_complete_step() -> None:
    store = InMemoryObjectStore()
    write_colls(store, workers=["worker_0", "worker_1"])
    for s in range(3):
        write_step(store, s, {"t": 1.0}, worker="worker_0")
    write_step(store, 0, {"t": 1.0}, worker="worker_1")
    trial = create_trial(store)
    assert trial.last_index_token == "index/000000000/000000000000_worker_1.json"
    write_step(store, 2, {"t": 1.0}, worker="worker_1")
    trial.refresh()
    assert trial.last_index_token == "index/000000000/000000000002_worker_1.json"
    assert trial.steps() == [0, 1, 2]  # 1 is covered by the later complete step


def test_incomplete_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW", "4")
    store = InMemoryObjectStore()
    write_colls(store, workers=["worker_0", "worker_1"])
    for s in range(10):
        write_step(store, s, {"t": 1.0})
    trial = create_trial(store)
    # 10 incomplete steps > window 4: the oldest are given up on, half a window at a time.
    assert trial.last_complete_step >= 1
    assert trial.steps()[: trial.last_complete_step + 1] == list(range(trial.last_complete_step + 1))
    assert len(trial.steps(show_incomplete_steps=True)) - len(trial.steps()) <= 4


def test_live_steps_appear_within_poll_interval(store: ObjectStore) -> None:
    write_colls(store)
    write_step(store, 0, {"t": 0.0})
    trial = create_trial(store, poll_interval=0.02)
    assert trial.steps() == [0]
    written: dict[int, float] = {}

    def writer() -> None:
        for s in range(1, 11):
            time.sleep(0.02)
            # Stamped before the write: the reader may see the step before write_step returns.
            written[s] = time.monotonic()
            write_step(store, s, {"t": float(s)})
        end(store)

    th = threading.Thread(target=writer)
    th.start()
    try:
        lags = []
        for s in range(1, 11):
            trial.wait_for_steps([s])
            lags.append(time.monotonic() - written[s])
            assert float(trial.tensor("t").value(s)) == float(s)
        assert max(lags) < 1.0, lags
        with pytest.raises(NoMoreData):
            trial.wait_for_steps([11])
        assert trial.loaded_all_steps
    finally:
        th.join()


def test_end_of_training_states(store: ObjectStore) -> None:
    write_colls(store)
    for s in (0, 2, 4):
        write_step(store, s, {"t": float(s)})
    trial = create_trial(store)
    assert not trial.loaded_all_steps and not trial.training_has_ended()
    assert trial.has_passed_step(1) is StepState.UNAVAILABLE  # step 2 is complete
    assert trial.has_passed_step(4) is StepState.AVAILABLE
    assert trial.has_passed_step(6) is StepState.NOT_YET_AVAILABLE
    t = trial.tensor("t")
    with pytest.raises(StepUnavailable):
        t.value(1)
    with pytest.raises(StepNotYetAvailable):
        t.value(6)
    with pytest.raises(StepUnavailable):
        trial.wait_for_steps([0, 1])
    end(store)
    trial.refresh()
    assert trial.loaded_all_steps and trial.training_has_ended()
    assert trial.has_passed_step(6) is StepState.UNAVAILABLE
    with pytest.raises(NoMoreData) as info:
        trial.wait_for_steps([6])
    assert info.value.last_step == 4
    # value() asks has_passed_step first, as real smdebug does (tests/compat checks it against
    # smdebug 1.0.34): past the end of a finished run the step is "unavailable", not "no more data".
    with pytest.raises(StepUnavailable):
        t.value(6)
    with pytest.raises(StepUnavailable):
        trial.wait_for_steps([3])
    trial.wait_for_steps([0, 2, 4])


def test_wait_for_steps_ends_with_marker() -> None:
    store = InMemoryObjectStore()
    write_colls(store)
    write_step(store, 0, {"t": 0.0})
    trial = create_trial(store, poll_interval=0.02, end_delay=0.01)
    timer = threading.Timer(0.2, end, args=(store,))
    timer.start()
    started = time.monotonic()
    with pytest.raises(NoMoreData):
        trial.wait_for_steps([10])
    assert 0.15 < time.monotonic() - started < 2.0
    timer.join()


def test_no_marker_timeout() -> None:
    store = InMemoryObjectStore()
    write_colls(store)
    write_step(store, 0, {"t": 0.0})
    trial = create_trial(store, poll_interval=0.02, no_marker_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(NoMoreDataTimeout) as info:
        trial.wait_for_steps([5])
    assert isinstance(info.value, NoMoreData)
    assert "0.3" in str(info.value)
    assert 0.25 < time.monotonic() - started < 2.0
    assert not trial.loaded_all_steps


def test_missing_collections_then_end_marker() -> None:
    store = InMemoryObjectStore()
    end(store)
    with pytest.raises(MissingCollectionFiles):
        create_trial(store)


def test_missing_collections_bounded_by_no_marker_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(MissingCollectionFiles):
        create_trial(InMemoryObjectStore(), poll_interval=0.02, no_marker_timeout=0.2)
    assert time.monotonic() - started < 2.0


def test_create_trial_waits_for_collections() -> None:
    store = InMemoryObjectStore()
    timer = threading.Timer(0.1, write_colls, args=(store,))
    timer.start()
    trial = create_trial(store, poll_interval=0.02, no_marker_timeout=5)
    assert trial.steps() == []
    timer.join()


def test_no_refresh_freezes_view(store: ObjectStore) -> None:
    write_colls(store)
    write_step(store, 0, {"t": 0.0})
    trial = create_trial(store, poll_interval=0.0)
    with no_refresh(trial):
        write_step(store, 1, {"t": 1.0})
        assert trial.steps() == [0]
        assert not trial.has_tensor("u")
    assert trial.dynamic_refresh
    assert trial.steps() == [0, 1]


def test_missing_event_file() -> None:
    store = InMemoryObjectStore()
    write_colls(store)
    for s in range(3):
        write_step(store, s, {"t": float(s)})
    store.delete("events/000000000001/000000000001_worker_0.tfevents")
    store.delete("events/000000000002/000000000002_worker_0.tfevents")
    trial = create_trial(store, poll_interval=0.02, missing_event_timeout=0.2)
    started = time.monotonic()
    with pytest.raises(TensorUnavailableForStep):
        trial.tensor("t").value(2)  # no later file, no end: retried until the timeout
    assert 0.15 < time.monotonic() - started < 2.0
    # The events file shows up while the reader retries (S3 lag): the value comes back.
    slow = create_trial(store, poll_interval=0.02, missing_event_timeout=5)
    timer = threading.Timer(0.1, write_step, args=(store, 2, {"t": 2.0}))
    timer.start()
    assert float(slow.tensor("t").value(2)) == 2.0
    timer.join()
    started = time.monotonic()
    with pytest.raises(TensorUnavailableForStep):
        slow.tensor("t").value(1)  # a later events file of worker_0 exists: give up at once
    assert time.monotonic() - started < 1.0
