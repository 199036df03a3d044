"""Fixtures for the trial tests: trials written with tensorio's real writer."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pytest

from murphy.core.collection import Collection, CollectionsDoc
from murphy.core.modes import ModeKeys
from murphy.storage import InMemoryObjectStore, LocalObjectStore
from murphy.storage.base import ObjectStore
from murphy.tensorio.locations import reduction_tensor_name
from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training


def write_colls(
    store: ObjectStore,
    workers: Iterable[str] = ("worker_0",),
    num_workers: int | None = None,
    collections: Iterable[Collection] = (),
) -> None:
    ws = list(workers)
    colls = {c.name: c for c in collections} or {"default": Collection("default")}
    doc = CollectionsDoc(colls, num_workers=num_workers if num_workers is not None else len(ws))
    for w in ws:
        write_collections(store, doc, w)


def write_step(
    store: ObjectStore,
    step: int,
    tensors: Mapping[str, Any],
    *,
    worker: str = "worker_0",
    mode: ModeKeys = ModeKeys.GLOBAL,
    mode_step: int | None = None,
    reductions: Mapping[str, Mapping[tuple[str, bool], Any]] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> None:
    with StepWriter(store, step, worker, mode, mode_step) as w:
        for name, value in tensors.items():
            w.add(name, np.asarray(value))
        for base, reds in (reductions or {}).items():
            for (op, abs_), value in reds.items():
                w.add(reduction_tensor_name(base, op, abs_), np.asarray(value))
        for name, shape in (shapes or {}).items():
            w.add_shape(name, shape)


def end(store: ObjectStore) -> None:
    write_end_of_training(store)


def tval(name: str, step: int, worker: str = "worker_0") -> np.ndarray[Any, Any]:
    """A value that depends on name, step and worker, so mix-ups fail."""
    seed = sum(map(ord, name + worker)) * 1000 + step
    return np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)


@pytest.fixture(params=["local", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> ObjectStore:
    """An empty trial root on each backend."""
    if request.param == "local":
        return LocalObjectStore(tmp_path / "trial")
    return InMemoryObjectStore()
