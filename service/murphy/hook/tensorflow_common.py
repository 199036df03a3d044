"""What murphy's TensorFlow hooks share, none of it importing TensorFlow: the collections smdebug's
TF hooks define, numpy reductions with TF's semantics, the worker's rank, and the JSON config.

Tensor values reach the hooks as numpy arrays (``Session.run`` results, ``Tensor.numpy()``), so the
snapshot/reduction seam is :class:`TFNumpyBackend`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from murphy.core.collection import CollectionKeys
from murphy.hook.backend import NumpyBackend

# smdebug's DEFAULT_TF_COLLECTIONS. TF tensors join collections explicitly (variables, losses,
# gradients) or through regexes the user adds; none of these has a default regex, except
# ``biases`` (``bias``, smdebug's graph-mode rule, applied to variable names only).
TF_COLLECTION_REGEXES: Mapping[str, tuple[str, ...]] = {
    CollectionKeys.ALL: (),
    CollectionKeys.DEFAULT: (),
    CollectionKeys.WEIGHTS: (),
    CollectionKeys.BIASES: (),
    CollectionKeys.GRADIENTS: (),
    CollectionKeys.LOSSES: (),
    CollectionKeys.METRICS: (),
    CollectionKeys.INPUTS: (),
    CollectionKeys.OUTPUTS: (),
    CollectionKeys.LAYERS: (),
    CollectionKeys.SM_METRICS: (),
    CollectionKeys.OPTIMIZER_VARIABLES: (),
}
# smdebug's TF DEFAULT_INCLUDE_COLLECTIONS (losses is the framework-neutral default already).
TF_DEFAULT_INCLUDE = (CollectionKeys.METRICS, CollectionKeys.SM_METRICS)
BIAS_PATTERN = "bias"
# Collections whose members are variables: a graph tensor is never added to them by a regex
# (smdebug's rule; a variable's value is fetched through its read op, exported as ``var.name``).
VARIABLE_COLLECTIONS = frozenset(
    {CollectionKeys.WEIGHTS, CollectionKeys.BIASES, CollectionKeys.OPTIMIZER_VARIABLES}
)


class TFNumpyBackend(NumpyBackend):
    """numpy snapshots with TensorFlow's reduction semantics.

    ``std``/``variance`` are population statistics (``tf.math.reduce_std``, smdebug's numpy path:
    ddof 0) and ``l1``/``l2`` are norms of the flattened tensor, as ``tf.norm`` computes them.
    """

    def snapshot(self, value: Any) -> Any:
        # A Session.run result is already a fresh array that TF no longer touches; an eager
        # tensor or variable is converted (a copy) first.
        if hasattr(value, "numpy"):
            value = value.numpy()
        return super().snapshot(value)

    def reduce(self, value: Any, op: str, abs_: bool) -> Any:
        if hasattr(value, "numpy"):
            value = value.numpy()
        arr = np.asarray(value)
        if abs_:
            arr = np.abs(arr)
        if not np.issubdtype(arr.dtype, np.floating) and not np.issubdtype(arr.dtype, np.complexfloating):
            arr = arr.astype(np.float64)
        fn = _REDUCTIONS.get(op)
        if fn is None:
            raise ValueError(f"unknown reduction {op!r}")
        return np.asarray(fn(arr))

    def shape(self, value: Any) -> tuple[int, ...]:
        return tuple(int(d) for d in np.shape(value))


_REDUCTIONS: dict[str, Callable[[np.ndarray], Any]] = {
    "min": np.min,
    "max": np.max,
    "mean": np.mean,
    "std": np.std,
    "variance": np.var,
    "sum": np.sum,
    "prod": np.prod,
    "l1": lambda a: np.sum(np.abs(a)),
    "l2": lambda a: np.sqrt(np.sum(np.square(np.abs(a)))),
}


def env_rank_world() -> tuple[int, int]:
    """The worker's rank and the world size from the launcher's environment.

    Horovod/MPI and torchrun-style launchers export these; a single process is rank 0 of 1.
    """
    for rank_key, size_key in (
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("HOROVOD_RANK", "HOROVOD_SIZE"),
        ("RANK", "WORLD_SIZE"),
    ):
        rank, size = os.environ.get(rank_key), os.environ.get(size_key)
        if rank is not None and size is not None:
            try:
                return int(rank), max(1, int(size))
            except ValueError:
                continue
    return 0, 1


def strip_index(name: str) -> str:
    """``dense/kernel:0`` → ``dense/kernel`` (Keras 3 paths have no index; TF1 names do)."""
    head, sep, tail = name.rpartition(":")
    return head if sep and tail.isdigit() else name
