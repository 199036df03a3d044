"""Writing a job's tensors for the dashboard tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from murphy.core.collection import Collection, CollectionsDoc
from murphy.core.modes import ModeKeys
from murphy.jobs.plans import open_uri, tensor_uri
from murphy.storage.base import ObjectStore
from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training


def job_store(plane: Any, name: str) -> ObjectStore:
    return open_uri(plane.settings, tensor_uri(plane.store.get(name)) or "")


def collections(store: ObjectStore, **colls: list[str]) -> None:
    doc = CollectionsDoc({c: Collection(c, tensor_names=set(n)) for c, n in colls.items()} or
                         {"default": Collection("default")}, num_workers=1)
    write_collections(store, doc, "worker_0")


def step(store: ObjectStore, n: int, tensors: Mapping[str, Any]) -> None:
    with StepWriter(store, n, "worker_0", ModeKeys.TRAIN, n) as w:
        for name, value in tensors.items():
            w.add(name, np.asarray(value, dtype=np.float32))


def end(store: ObjectStore) -> None:
    write_end_of_training(store)
