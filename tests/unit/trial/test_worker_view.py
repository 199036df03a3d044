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
