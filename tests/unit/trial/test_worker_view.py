"""``WorkerView``: one worker's series of a multi-worker trial (issue 17 §1)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from murphy.core.collection import Collection, CollectionsDoc
from murphy.core.modes import ModeKeys
from murphy.exceptions import TensorUnavailableForStep
from murphy.storage import InMemoryObjectStore
from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training
from murphy.trial import create_trial
from murphy.trial.trial import Trial
from murphy.trial.worker_view import WorkerView, step_workers

_ids = itertools.count()


def two_workers(end: bool = True) -> Trial:
    """worker_0 saves loss and w at steps 0-3; worker_1 saves loss at 0-2, w only at 2, and
    has not written step 3 yet (live) or never will (ended)."""
    store = InMemoryObjectStore(f"worker-view-{end}-{next(_ids)}")
    for w in ("worker_0", "worker_1"):
        write_collections(store, CollectionsDoc({"all": Collection("all"), "inputs": Collection(
            "inputs", include_regex=["_input"])}, num_workers=2), w)
    for s in range(4):
        mode = ModeKeys.TRAIN if s < 2 else ModeKeys.EVAL
        with StepWriter(store, s, "worker_0", mode, s % 2) as wr:
            wr.add("w", np.full(2, s, dtype=np.float32))
            wr.add("loss", np.float32(s))
            wr.add("model_input_0", np.zeros(1, dtype=np.float32))
        if s < 3:
            with StepWriter(store, s, "worker_1", mode, s % 2) as wr:
                wr.add("loss", np.float32(10 + s))
                if s == 2:
                    wr.add("w", np.full(2, 20, dtype=np.float32))
    if end:
        write_end_of_training(store)
    return create_trial(store, poll_interval=0.01, end_delay=0.0)


def test_a_view_reads_one_workers_steps_and_values() -> None:
    trial = two_workers()
    v0, v1 = WorkerView(trial, "worker_0"), WorkerView(trial, "worker_1")
    assert v1.workers() == ["worker_1"] and v1.name == trial.name
    assert v0.steps() == [0, 1, 2, 3] and v1.steps() == [0, 1, 2]
    assert v1.steps(mode=ModeKeys.EVAL) == [0] and v1.wrote(2) and not v1.wrote(3)
    assert v1.tensor("w").steps() == [2] and v0.tensor("w").steps() == [0, 1, 2, 3]
    assert v1.tensor("w").prev_steps(3, 5) == [2]
    assert v1.tensor("loss").value(1).tolist() == [11.0] and v0.tensor("loss").value(1).tolist() == [1.0]
    assert v1.tensor("w").value(0, mode=ModeKeys.EVAL).tolist() == [20, 20]
    assert {s: v.tolist() for s, v in v1.tensor("loss").values().items()} == {0: [10.0], 1: [11.0], 2: [12.0]}
    with pytest.raises(TensorUnavailableForStep):
        v1.tensor("w").value(1)  # worker_0 saved it there; worker_1 did not
    with pytest.raises(TensorUnavailableForStep):
        v1.tensor("w").reduction_value(1, "mean")
    assert v1.tensor("w").workers(2) == ["worker_1"]
    assert v1.tensor_names(step=1) == ["loss"] and v0.tensor_names(step=1) == ["loss", "model_input_0", "w"]
    assert v1.tensor_names() == trial.tensor_names()
    assert v1.write_order(2) == ["loss", "w"] and v0.write_order(2) == ["w", "loss", "model_input_0"]
    assert v1.inputs(1) == [] and len(v0.inputs(1)) == 1
    # Everything else is the trial's: modes, completeness, the end.
    assert v1.mode(2) is ModeKeys.EVAL and v1.loaded_all_steps
    assert step_workers(trial, 2) == ["worker_0", "worker_1"] and step_workers(trial, 3) == ["worker_0"]
    assert step_workers(trial, 1, ModeKeys.EVAL) == ["worker_0"] and step_workers(trial, 9) == []


def test_a_view_of_a_live_trial_sees_complete_steps_only() -> None:
    trial = two_workers(end=False)
    v0 = WorkerView(trial, "worker_0")
    # Step 3 is worker_0's alone so far: not complete, in no view.
    assert trial.steps() == [0, 1, 2] and v0.steps() == [0, 1, 2]
    assert v0.tensor("loss").steps() == [0, 1, 2]
    assert v0.tensor("loss").steps(show_incomplete_steps=True) == [0, 1, 2, 3]
    assert v0.steps(show_incomplete_steps=True) == [0, 1, 2, 3]


def _reference_steps(trial: Trial, worker: str, mode: ModeKeys, incomplete: bool) -> list[int]:
    """A view's steps by definition: the trial's steps that ``worker`` wrote."""
    return [s for s in trial.steps(mode, incomplete) if worker in step_workers(trial, s, mode)]


def test_view_steps_follow_a_live_three_worker_trial_with_incomplete_steps() -> None:
    # worker_2 skips every third step and worker_1 lags two steps behind: incomplete steps at
    # the end, in two modes; then more steps arrive and training ends. Each view's steps()
    # (asked again between writes, so a stale answer would show) must be the definition's.
    store = InMemoryObjectStore(f"worker-view-live3-{next(_ids)}")
    workers = ("worker_0", "worker_1", "worker_2")
    for w in workers:
        write_collections(store, CollectionsDoc({"all": Collection("all")}, num_workers=3), w)

    def write(steps: range, writers: tuple[str, ...] = workers, lag_from: int | None = None) -> None:
        for s in steps:
            mode = ModeKeys.EVAL if s % 4 == 3 else ModeKeys.TRAIN
            for w in writers:
                if (w == "worker_2" and s % 3 == 1) or (w == "worker_1" and lag_from is not None and s >= lag_from):
                    continue
                with StepWriter(store, s, w, mode, s // 4 if mode is ModeKeys.EVAL else s) as wr:
                    wr.add("loss", np.float32(s))

    write(range(0, 12), lag_from=10)
    trial = create_trial(store, poll_interval=0.0, end_delay=0.0)
    views = {w: WorkerView(trial, w) for w in workers}
    modes = (ModeKeys.GLOBAL, ModeKeys.TRAIN, ModeKeys.EVAL)

    def check() -> None:
        for w, view in views.items():
            for mode in modes:
                for incomplete in (False, True):
                    got = view.steps(mode=mode, show_incomplete_steps=incomplete)
                    assert got == _reference_steps(trial, w, mode, incomplete), (w, mode, incomplete)
                    got.append(-1)  # the caller's copy: the next answer must not change

    check()
    # Steps 10 and 11 wait for worker_1; worker_2 skipped 1, 4, 7 and 10.
    assert views["worker_2"].steps() == [0, 2, 3, 5, 6, 8, 9]
    assert views["worker_2"].steps(show_incomplete_steps=True) == [0, 2, 3, 5, 6, 8, 9, 11]
    assert views["worker_0"].steps(mode=ModeKeys.EVAL) == [0, 1]
    assert views["worker_0"].steps(mode=ModeKeys.EVAL, show_incomplete_steps=True) == [0, 1, 2]
    assert views["worker_1"].steps(mode=ModeKeys.EVAL, show_incomplete_steps=True) == [0, 1]
    check()  # asked again with nothing new: the same answers
    write(range(10, 12), writers=("worker_1",))  # worker_1 catches up on 10 and 11 ...
    write(range(12, 20), lag_from=19)  # ... and lags again on 19 (worker_2 skips it)
    check()
    assert 11 in views["worker_1"].steps() and 19 not in views["worker_1"].steps(show_incomplete_steps=True)
    write_end_of_training(store)
    check()
    assert trial.loaded_all_steps and views["worker_0"].steps()[-1] == 19


def test_a_views_labels_and_predictions_are_its_workers_in_suffix_order() -> None:
    # worker_1 saved labels_10 and labels_2 at step 0 (not worker_0's labels_1), worker_0
    # saved predictions only: each view answers what its worker saved, smdebug's name order.
    store = InMemoryObjectStore(f"worker-view-labels-{next(_ids)}")
    for w in ("worker_0", "worker_1"):
        write_collections(store, CollectionsDoc({"all": Collection("all")}, num_workers=2), w)
    with StepWriter(store, 0, "worker_0", ModeKeys.GLOBAL, 0) as wr:
        wr.add("labels_1", np.float32(1))
        wr.add("predictions", np.float32(5))
    with StepWriter(store, 0, "worker_1", ModeKeys.GLOBAL, 0) as wr:
        wr.add("labels_10", np.float32(10))
        wr.add("labels_2", np.float32(2))
    write_end_of_training(store)
    trial = create_trial(store, poll_interval=0.0, end_delay=0.0)
    v0, v1 = WorkerView(trial, "worker_0"), WorkerView(trial, "worker_1")
    assert [a.tolist() for a in v1.labels(0)] == [[2.0], [10.0]] and v1.predictions(0) == []
    assert [a.tolist() for a in v0.labels(0)] == [[1.0]] and [a.tolist() for a in v0.predictions(0)] == [[5.0]]
    assert v0.inputs(0) == [] and v0.collections() is trial.collections()


def test_the_trials_per_worker_accessors_answer_as_last_refreshed() -> None:
    # What WorkerView reads instead of the trial's private maps (Trial.files_at, worker_steps,
    # state_version): no refresh of their own, mode steps resolved to global ones.
    trial = two_workers(end=False)
    assert sorted(trial.files_at(2)) == ["worker_0", "worker_1"]
    assert sorted(trial.files_at(0, ModeKeys.EVAL)) == ["worker_0", "worker_1"]  # global step 2
    assert sorted(trial.files_at(2)["worker_1"][1].slots) == ["loss", "w"]
    assert list(trial.files_at(3)) == ["worker_0"] and trial.files_at(9) == {}
    assert trial.files_at(5, ModeKeys.EVAL) == {}
    assert trial.worker_steps("worker_1", ModeKeys.GLOBAL) == [0, 1, 2]
    assert trial.worker_steps("worker_0", ModeKeys.GLOBAL, show_incomplete_steps=True) == [0, 1, 2, 3]
    assert trial.worker_steps("worker_1", ModeKeys.EVAL, show_incomplete_steps=True) == [0]
    before = trial.state_version
    with StepWriter(trial.store, 4, "worker_0", ModeKeys.EVAL, 2) as wr:
        wr.add("loss", np.float32(4))
    # Not seen until the trial refreshes (the accessors ask nothing of the store).
    assert trial.files_at(4) == {} and trial.state_version == before
    assert trial.worker_steps("worker_0", ModeKeys.GLOBAL, show_incomplete_steps=True) == [0, 1, 2, 3]
    write_end_of_training(trial.store)
    trial.refresh()
    assert trial.state_version != before  # the views' caches go
    assert list(trial.files_at(4)) == ["worker_0"]
    assert trial.worker_steps("worker_0", ModeKeys.GLOBAL) == [0, 1, 2, 3, 4]
