"""Opening a trial through the step manifest: few requests, the same answers, and every kind of
damaged manifest falling back to the index files (never to wrong steps)."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.storage import InMemoryObjectStore
from murphy.storage.recording import RecordingObjectStore
from murphy.tensorio.locations import index_file_key
from murphy.tensorio.manifest import (
    MANIFEST_PREFIX,
    ManifestWriter,
    decode_segment,
    encode_segment,
    segment_key,
)
from murphy.tensorio.writer import StepWriter
from murphy.trial import create_trial

from .conftest import end, tval, write_colls

STEPS = 250
NAMES = ["a", "b", "c"]


def _write(store: InMemoryObjectStore, workers: tuple[str, ...] = ("worker_0",), manifest: bool = True) -> None:
    write_colls(store, workers)
    for worker in workers:
        mw = ManifestWriter(store, worker) if manifest else None
        if mw:
            mw.begin()
        for step in range(STEPS):
            mode = ModeKeys.TRAIN if step % 10 else ModeKeys.EVAL
            with StepWriter(store, step, worker, mode, step) as w:
                for name in NAMES:
                    w.add(name, tval(name, step, worker))
            if mw and w.index_bytes is not None:
                mw.add(w.index_file_name, step, w.index_bytes)
        if mw:
            mw.flush()
    end(store)


def _answers(store: Any) -> tuple[Any, ...]:
    trial = create_trial(store, end_delay=0)
    vals = {(n, s, w): trial.tensor(n).value(s, worker=w).tobytes() for n in NAMES for s in (0, 137, STEPS - 1) for w in trial.workers()}
    return (trial.steps(), trial.steps(ModeKeys.EVAL), trial.tensor_names(), trial.workers(), trial.loaded_all_steps, vals)


def _open(store: RecordingObjectStore) -> Counter[str]:
    trial = create_trial(store, end_delay=0)
    trial.steps()
    trial.tensor_names()
    return store.calls


@pytest.mark.parametrize("workers", [("worker_0",), ("worker_0", "worker_1")])
def test_a_finished_trial_opens_in_a_handful_of_requests(workers: tuple[str, ...]) -> None:
    plain, packed = InMemoryObjectStore(), InMemoryObjectStore()
    _write(plain, workers, manifest=False)
    _write(packed, workers)
    without, with_ = _open(RecordingObjectStore(plain)), _open(RecordingObjectStore(packed))
    assert without["get"] >= STEPS * len(workers)
    # collections (1 per worker) + 3 segments per worker; a few LISTs; the end marker.
    assert with_["get"] <= len(workers) * (1 + 3), with_
    assert with_["list"] <= 4, with_
    assert _answers(RecordingObjectStore(packed)) == _answers(RecordingObjectStore(plain))


def _damaged(damage: str) -> InMemoryObjectStore:
    store = InMemoryObjectStore()
    _write(store)
    key = segment_key("worker_0", 100, 199)
    data = store.get(key)
    if damage == "torn":
        store.put(key, data[: len(data) // 2])
    elif damage == "missing":
        store.delete(key)
    elif damage == "lacks-a-key":
        entries = decode_segment(data)
        drop = index_file_key(150, "worker_0")
        store.put(key, encode_segment("worker_0", [(k, 100, v) for k, v in entries.items() if k != drop]))
    elif damage == "foreign-object":
        store.put(MANIFEST_PREFIX + "worker_0/README", b"not a segment")
        store.put(segment_key("worker_9", 0, 99), b"garbage for a worker nobody lists")
    return store


@pytest.mark.parametrize("damage", ["torn", "missing", "lacks-a-key", "foreign-object"])
def test_a_damaged_manifest_falls_back_to_the_index_files(damage: str, caplog: pytest.LogCaptureFixture) -> None:
    reference = InMemoryObjectStore()
    _write(reference, manifest=False)
    store = _damaged(damage)
    with caplog.at_level(logging.WARNING):
        assert _answers(RecordingObjectStore(store)) == _answers(RecordingObjectStore(reference))
    calls = _open(RecordingObjectStore(store))
    if damage in ("torn", "missing"):
        assert calls["get"] >= 100  # the segment's 100 files, one by one
    if damage == "torn":
        assert any("ignoring step manifest segment" in r.getMessage() for r in caplog.records)


def test_listing_decides_which_steps_exist_not_the_manifest() -> None:
    """An index file deleted after its segment was written: the step is gone for the reader too
    (as without a manifest), even though a segment still holds its bytes."""
    store = InMemoryObjectStore()
    _write(store)
    store.delete(index_file_key(42, "worker_0"))
    trial = create_trial(RecordingObjectStore(store), end_delay=0)
    assert 42 not in trial.steps() and len(trial.steps()) == STEPS - 1


def test_a_live_trial_reads_its_open_tail_file_by_file_and_never_relists_the_manifest() -> None:
    store = InMemoryObjectStore()
    write_colls(store)
    mw = ManifestWriter(store, "worker_0")
    mw.begin()

    def step(s: int) -> None:
        with StepWriter(store, s, "worker_0", ModeKeys.TRAIN, s) as w:
            w.add("a", tval("a", s))
        assert w.index_bytes is not None
        mw.add(w.index_file_name, s, w.index_bytes)

    for s in range(230):
        step(s)
    counting = RecordingObjectStore(store)
    trial = create_trial(counting, end_delay=0)
    assert trial.steps(show_incomplete_steps=True) == list(range(230))
    # 2 segments for steps 0-199; the open tail (200-229) file by file.
    first_gets = counting.calls["get"]
    assert first_gets <= 1 + 2 + 30, counting.calls
    for s in range(230, 233):
        step(s)
    before = Counter(counting.calls)
    assert trial.steps(show_incomplete_steps=True) == list(range(233))
    delta = counting.calls - before
    # A poll with 3 new steps: one LIST of index/, the end marker, 3 GETs. No manifest listing.
    assert delta["list"] == 1 and delta["get"] == 3, delta
    np.testing.assert_array_equal(trial.tensor("a").value(231), tval("a", 231))


def test_a_rule_far_behind_catches_up_through_the_manifest() -> None:
    """Requests per poll stay bounded by the new steps / 100, not by the steps already read."""
    store = InMemoryObjectStore()
    write_colls(store)
    mw = ManifestWriter(store, "worker_0")
    mw.begin()
    counting = RecordingObjectStore(store)
    trial = None
    for s in range(1000):
        with StepWriter(store, s, "worker_0", ModeKeys.TRAIN, s) as w:
            w.add("a", tval("a", s))
        assert w.index_bytes is not None
        mw.add(w.index_file_name, s, w.index_bytes)
        if s == 9:
            trial = create_trial(counting, end_delay=0)
            trial.steps()
    assert trial is not None
    before = Counter(counting.calls)
    assert len(trial.steps(show_incomplete_steps=True)) == 1000
    delta = counting.calls - before
    # Steps 10-999: the ten segments 0-99 .. 900-999, one GET each, instead of 990 GETs.
    assert delta["get"] == 10, delta
