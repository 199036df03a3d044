"""FloatSteps (a step of Python floats from cached record pieces) writes, byte for byte, the events
and index files StepWriter writes for np.array([value]) of each, across steps whose step field and
mode step change length, every mode, awkward names, and many steps through one instance."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.storage.memory import InMemoryObjectStore
from murphy.tensorio.float_step import FloatSteps
from murphy.tensorio.writer import StepWriter

NAMES = ["train-logloss", "validation-logloss", "validation_0-auc", 'quo"te', "back\\slash", "ünï☃",
         "tab\tnl\n", "\U0001f600", "x" * 200]
# Lengths change at 128 and 16384 (varints) and at every power of ten (decimal mode steps).
STEPS = [0, 1, 9, 10, 99, 100, 127, 128, 999, 1000, 16383, 16384, 10**10]


class Clock:
    """Wall times the writer under test reads; the oracle is given the same ones."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.given: list[float] = []

    def __call__(self) -> float:
        self.given.append(self.r.random() * 2e9)
        return self.given[-1]


def _oracle(step: int, worker: str, mode: ModeKeys, mode_step: int, items: list[tuple[str, float]],
            walls: list[float]) -> dict[str, bytes]:
    store = InMemoryObjectStore()
    writer = StepWriter(store, step, worker, mode, mode_step)
    for (name, value), wall in zip(items, walls, strict=True):
        writer.add(name, np.array([value]), wall_time=wall)
    writer.close()
    return {key: store.get(key) for key in store.list("")}


@pytest.mark.parametrize("seed", range(40))
def test_float_steps_write_the_step_writers_bytes(seed: int) -> None:
    r = random.Random(seed)
    worker = r.choice(["worker_0", "worker_12", "/job:worker/replica:0/task:1/device:CPU:0"])
    clock = Clock(seed)
    steps = FloatSteps(worker, clock=clock)
    for _ in range(25):  # one instance: its caches must hold whatever came before
        step = r.choice([*STEPS, r.randrange(10**12)])
        mode = r.choice(list(ModeKeys))
        mode_step = r.choice([*STEPS, r.randrange(10**15), step])
        items = [(name, r.choice([0.0, -0.0, 0.5, math.inf, -math.inf, math.nan, r.random() * 10.0 ** r.randrange(-300, 300)]))
                 for name in r.sample(NAMES, r.randrange(1, 5))]
        store = InMemoryObjectStore()
        clock.given.clear()
        key, data = steps.write(store, step, mode, mode_step, items)
        written = {k: store.get(k) for k in store.list("")}
        expected = _oracle(step, worker, mode, mode_step, items, clock.given)
        assert written == expected
        assert expected[key] == data


def test_a_negative_mode_step_takes_the_general_encoder() -> None:
    clock = Clock(1)
    store = InMemoryObjectStore()
    FloatSteps("worker_0", clock=clock).write(store, 3, ModeKeys.EVAL, -7, [("a-b", 1.0), ("c-d", 2.0)])
    assert {k: store.get(k) for k in store.list("")} == _oracle(3, "worker_0", ModeKeys.EVAL, -7,
                                                                [("a-b", 1.0), ("c-d", 2.0)], clock.given)


def test_a_float_step_is_one_write_per_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from murphy.storage.local import LocalObjectStore

    store = LocalObjectStore(tmp_path)
    steps = FloatSteps("worker_0")
    steps.write(store, 0, ModeKeys.GLOBAL, 0, [("train-logloss", 0.5)])  # the directories exist now
    writes: list[int] = []
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: (writes.append(len(data)), real_write(fd, data))[1])
    monkeypatch.setattr(os, "writev", lambda *a: pytest.fail("writev of a float step's pieces"))
    steps.write(store, 1000, ModeKeys.GLOBAL, 1000, [("train-logloss", 0.5), ("validation-logloss", 0.25)])
    monkeypatch.undo()
    events = store.get("events/000000001000/000000001000_worker_0.tfevents")
    index = store.get("index/000000001/000000001000_worker_0.json")
    assert writes == [len(events), len(index)]
    with pytest.raises(ValueError):
        steps.write(store, 5, ModeKeys.GLOBAL, 5, [])
