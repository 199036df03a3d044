"""The dashboard's per-step statistics: the scalar paths (one value, a batch of them) give exactly
what numpy's reductions give, NaN, ±Inf, signed zeros and every numeric dtype included."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from murphy.ui.stepstats import STATS, all_scalars, numpy_stats, scalar_columns, step_stats

NUMERIC = ["<f2", "<f4", "<f8", "i1", "<i2", "<i4", "<i8", "u1", "<u2", "<u4", "<u8", "?"]
SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e300, -1e-300, 3.4e38]


def _same(a: tuple[float, ...], b: tuple[float, ...]) -> None:
    assert len(a) == len(b) == len(STATS)
    for x, y in zip(a, b, strict=True):
        assert type(x) is float and type(y) is float
        assert (math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y)), (a, b)


scalars = st.sampled_from(NUMERIC).flatmap(
    lambda dt: hnp.arrays(np.dtype(dt), st.sampled_from([(), (1,), (1, 1)]))
)


@given(values=st.lists(scalars, min_size=1, max_size=30))
@settings(max_examples=300, deadline=None)
def test_scalar_paths_equal_numpy_reductions(values: list[np.ndarray[Any, Any]]) -> None:
    assert all_scalars(values)
    cols = scalar_columns(values)
    for k, v in enumerate(values):
        want = numpy_stats(v)
        _same(step_stats(v), want)
        _same(tuple(c[k] for c in cols), want)


def test_nan_and_inf_are_counted_by_every_path() -> None:
    for dt in ("<f2", "<f4", "<f8"):
        with np.errstate(over="ignore"):  # 1e300 in float16/32 is +inf: one more case
            values = [np.array(x, dtype=dt) for x in SPECIALS]
        cols = scalar_columns(values)
        for k, v in enumerate(values):
            _same(step_stats(v), numpy_stats(v))
            _same(tuple(c[k] for c in cols), numpy_stats(v))
        assert cols[STATS.index("nan_count")][:3] == [1.0, 0.0, 0.0]
        assert cols[STATS.index("inf_count")][:3] == [0.0, 1.0, 1.0]


def test_arrays_and_non_numeric_values_keep_the_numpy_path() -> None:
    w = np.array([[3.0, math.nan], [-4.0, math.inf]], dtype=np.float32)
    _same(step_stats(w), numpy_stats(w))
    assert step_stats(w)[STATS.index("nan_count")] == 1.0 and step_stats(w)[STATS.index("inf_count")] == 1.0
    assert not all_scalars([np.float32(1.0) * np.ones(1), w])
    s = np.array("text")
    assert all(math.isnan(x) for x in step_stats(s)) and not all_scalars([s])
    c = np.array(1 + 2j)
    assert all(math.isnan(x) for x in step_stats(c)) and not all_scalars([c])
    _same(step_stats(np.zeros(0, np.float32)), numpy_stats(np.zeros(0, np.float32)))
