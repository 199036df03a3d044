"""The synthetic training data both rule benchmarks write, with murphy's writer.

A small "network" of four layers: raw weights (collection ``weights``) and raw gradients plus
their stored ``abs_mean`` reduction (collection ``gradients``; VanishingGradient reads
``reduction_value(step, "mean", abs=True)``, which both readers answer from the stored
reduction). 8x8 float32 tensors, one worker, TRAIN mode. A "bad" step puts a NaN and an inf in
the last layer's gradient (the last tensor in layer order, so ExplodingTensor scans everything
before it fires).
"""

from __future__ import annotations

from typing import Any

import numpy as np

LAYERS = ("conv1", "conv2", "fc1", "fc2")
SHAPE = (8, 8)


def weight_name(layer: str) -> str:
    return f"Net_{layer}.weight"


def gradient_name(layer: str) -> str:
    return f"gradient/Net_{layer}.weight"


def write_collections_file(store: Any) -> None:
    """The collections file (written first: both readers wait for it when opening a trial)."""
    from murphy.core import Collection, CollectionsDoc
    from murphy.core.reduction_config import ReductionConfig
    from murphy.tensorio.writer import write_collections

    weights = [weight_name(layer) for layer in LAYERS]
    grads = [gradient_name(layer) for layer in LAYERS]
    rc = ReductionConfig(abs_reductions=["mean"], save_raw_tensor=True)
    doc = CollectionsDoc({
        "weights": Collection("weights", include_regex=[".*weight"], tensor_names=weights),
        "gradients": Collection("gradients", include_regex=["^gradient"], tensor_names=grads,
                                reduction_config=rc),
    }, 1)
    write_collections(store, doc)


def write_step(store: Any, step: int, rng: np.random.Generator, bad: bool = False) -> tuple[str, bytes]:
    """One step's events + index file (the index is put last, so it marks the step visible).

    Returns the index file's key and bytes (for the step manifest, as the hook's writer packs it)."""
    from murphy.core import ModeKeys
    from murphy.tensorio.locations import reduction_tensor_name
    from murphy.tensorio.writer import StepWriter

    w = StepWriter(store, step, "worker_0", ModeKeys.TRAIN, step)
    for layer in LAYERS:
        w.add(weight_name(layer), rng.standard_normal(SHAPE, dtype=np.float32))
    for layer in LAYERS:
        g = rng.standard_normal(SHAPE, dtype=np.float32) * np.float32(1e-2)
        if bad and layer == LAYERS[-1]:
            g[0, 0], g[1, 1] = np.nan, np.inf
        w.add(gradient_name(layer), g)
        abs_mean = np.asarray(np.mean(np.abs(g)), dtype=np.float32)
        w.add(reduction_tensor_name(gradient_name(layer), "mean", abs_=True), abs_mean)
    w.close()
    assert w.index_bytes is not None
    return w.index_file_name, w.index_bytes
