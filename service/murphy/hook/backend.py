"""The small seam between the framework-neutral hook and a framework's tensors.

The training thread only *snapshots*: :meth:`TensorBackend.snapshot` copies a tensor (a device
→ host copy may be left in flight) and :meth:`TensorBackend.reduce` computes a reduction on the
tensor's own device, returning a 0-d tensor. :meth:`TensorBackend.fence` returns something the
writer thread waits on before it reads the snapshots of a step; :meth:`TensorBackend.to_numpy`
then runs on the writer thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np


class TensorBackend(Protocol):
    """What the hook needs from a framework."""

    def is_tensor(self, value: Any) -> bool:
        """True for a value this backend can snapshot."""
        ...

    def snapshot(self, value: Any) -> Any:
        """A private copy of ``value`` that later in-place updates cannot change."""
        ...

    def reduce(self, value: Any, op: str, abs_: bool) -> Any:
        """Reduction ``op`` (min, max, mean, std, variance, sum, prod, l1, l2) of ``value``."""
        ...

    def shape(self, value: Any) -> tuple[int, ...]:
        """The shape of ``value``."""
        ...

    def fence(self) -> Callable[[], None] | None:
        """Called after a step's snapshots were issued; the writer calls the result first."""
        ...

    def to_numpy(self, snap: Any) -> tuple[np.ndarray | None, str | None]:
        """``(array, original_dtype)`` of a snapshot; ``original_dtype`` names a dtype the
        array had to be widened from (``"bfloat16"``), else None. Runs on the writer thread.
        ``array`` is None for a snapshot that turned out invalid (a deferred copy whose source
        changed first): the record is then not written."""
        ...


def _numpy_reduce(arr: np.ndarray, op: str) -> np.ndarray:
    # ddof=1 matches torch's default (unbiased) std/var, which is what smdebug's PyTorch hook stores.
    ops: dict[str, Callable[[np.ndarray], Any]] = {
        "min": np.min,
        "max": np.max,
        "mean": np.mean,
        "std": lambda a: np.std(a, ddof=1),
        "variance": lambda a: np.var(a, ddof=1),
        "sum": np.sum,
        "prod": np.prod,
        "l1": lambda a: np.sum(np.abs(a)),
        "l2": lambda a: np.sqrt(np.sum(np.square(a))),
    }
    try:
        fn = ops[op]
    except KeyError:
        raise ValueError(f"unknown reduction {op!r}") from None
    return np.asarray(fn(arr))


class NumpyBackend:
    """Backend for numpy arrays and Python scalars (the default of :class:`BaseHook`)."""

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, np.ndarray | np.generic | int | float | bool)

    def snapshot(self, value: Any) -> Any:
        arr = np.array(value, copy=True)
        # Python scalars are written with shape [1], like smdebug's make_numpy_array.
        return arr.reshape(1) if arr.ndim == 0 and not isinstance(value, np.ndarray) else arr

    def reduce(self, value: Any, op: str, abs_: bool) -> Any:
        arr = np.asarray(value)
        return _numpy_reduce(np.abs(arr) if abs_ else arr, op)

    def shape(self, value: Any) -> tuple[int, ...]:
        return tuple(np.shape(value))

    def fence(self) -> Callable[[], None] | None:
        return None

    def to_numpy(self, snap: Any) -> tuple[np.ndarray, str | None]:
        return np.asarray(snap), None
