"""The per-step statistics the dashboard keeps for every tensor, from saved values.

Most series are scalars (losses, metrics, a gradient's saved norm): for them the statistics are
the value itself, so :func:`step_stats` takes them without numpy's reductions, and
:func:`scalar_columns` takes a whole run of scalar steps (a 100,000-step loss read in one batch)
with a handful of array operations. Both give exactly what the generic path gives (the l2 norm as
``sqrt(v * v)``, as the generic path's dot product computes it, overflow and all).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: the per-step statistics kept for every tensor, in column order
STATS = ("value", "min", "max", "mean", "l2", "nan_count", "inf_count")
_NUMERIC = frozenset("fiub")
_INF = math.inf


def _scalar(v: float) -> tuple[float, ...]:
    # mean: numpy sums from +0.0, so the mean of [-0.0] is 0.0 (``+ 0.0`` changes nothing else)
    return (v, v, v, v + 0.0, math.sqrt(v * v), 1.0 if v != v else 0.0, 1.0 if v in (_INF, -_INF) else 0.0)


def step_stats(value: np.ndarray[Any, Any]) -> tuple[float, ...]:
    """``STATS`` of one saved value. ``value`` is the scalar itself, else the l2 norm."""
    a = value if isinstance(value, np.ndarray) else np.asarray(value)
    if a.dtype.kind not in _NUMERIC:
        return (math.nan,) * len(STATS)
    if a.size == 1:
        return _scalar(float(a.reshape(-1)[0]))
    return numpy_stats(a)


def numpy_stats(value: np.ndarray[Any, Any]) -> tuple[float, ...]:
    """:func:`step_stats` by numpy's reductions, for a value of any size (the general path)."""
    a = np.asarray(value)
    if a.dtype.kind not in _NUMERIC:
        return (math.nan,) * len(STATS)
    f = a.astype(np.float64, copy=False).ravel()
    if f.size == 0:
        return (math.nan, math.nan, math.nan, math.nan, 0.0, 0.0, 0.0)
    with np.errstate(all="ignore"):
        l2 = float(np.sqrt(np.dot(f, f)))
        lo, hi, mean = float(f.min()), float(f.max()), float(f.mean())
    nan = float(np.count_nonzero(np.isnan(f)))
    inf = float(np.count_nonzero(np.isinf(f)))
    return (float(f[0]) if f.size == 1 else l2, lo, hi, mean, l2, nan, inf)


def all_scalars(values: Sequence[np.ndarray[Any, Any]]) -> bool:
    """True if every value is one number (of a numeric dtype): :func:`scalar_columns` takes them."""
    return all(v.size == 1 and v.dtype.kind in _NUMERIC for v in values)


def scalar_columns(values: Sequence[np.ndarray[Any, Any]]) -> list[list[float]]:
    """``STATS`` columns of one-number values (see :func:`all_scalars`), as :func:`step_stats`
    gives them step by step (the first three are one list: the caller copies, not mutates)."""
    v = np.fromiter((float(x.reshape(-1)[0]) for x in values), dtype=np.float64, count=len(values))
    with np.errstate(all="ignore"):
        l2 = np.sqrt(v * v)
    col = v.tolist()
    return [col, col, col, (v + 0.0).tolist(), l2.tolist(), np.isnan(v).astype(np.float64).tolist(),
            np.isinf(v).astype(np.float64).tolist()]
