"""The min/max bucket downsampler: nothing a chart must show is ever dropped (property tests)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from murphy.ui.downsample import decode, downsample, encode

values = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                   st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 1e30, -1e30]))


@st.composite
def series(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int | None, int | None, int]:
    n = draw(st.integers(0, 250))
    steps = np.array(sorted(draw(st.sets(st.integers(0, 5000), min_size=n, max_size=n))), dtype=np.int64)
    vals = np.array(draw(st.lists(values, min_size=len(steps), max_size=len(steps))), dtype=np.float64)
    x0 = draw(st.one_of(st.none(), st.integers(-10, 5000)))
    x1 = draw(st.one_of(st.none(), st.integers(x0 if x0 is not None else -10, 5100)))
    px = draw(st.integers(1, 120))
    return steps, vals, x0, x1, px


def _kind(v: float) -> str:
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


@settings(max_examples=150, deadline=None)
@given(series())
def test_every_bucket_keeps_its_min_max_last_and_every_nonfinite_point(case: tuple) -> None:
    steps, vals, x0, x1, px = case
    d = downsample(steps, vals, x0, x1, px)
    inside = [(int(s), float(v)) for s, v in zip(steps, vals, strict=False)
              if (x0 is None or s >= x0) and (x1 is None or s <= x1)]
    assert d.points == len(inside)
    assert len(d.steps) <= max(px, 0) or d.raw
    if not inside:
        assert d.steps == [] and d.nonfinite == []
        return
    # The last point of the window is the last bucket's last point, with its value.
    assert d.steps[-1] == inside[-1][0]
    assert encode(d.last[-1]) == encode(inside[-1][1])
    # Buckets tile the window in order; each keeps its finite min and max, exactly.
    covered = 0
    for i, (lo_step, hi_step) in enumerate(zip(d.first, d.steps, strict=False)):
        members = [(s, v) for s, v in inside if lo_step <= s <= hi_step]
        assert members and members[0][0] == lo_step and members[-1][0] == hi_step
        covered += len(members)
        finite = [v for _, v in members if math.isfinite(v)]
        assert d.min[i] == (min(finite) if finite else None)
        assert d.max[i] == (max(finite) if finite else None)
        assert encode(d.last[i]) == encode(members[-1][1])
    assert covered == len(inside)
    # Every non-finite point is in exactly one run of its kind; runs hold nothing else.
    bad = [(s, _kind(v)) for s, v in inside if not math.isfinite(v)]
    from_runs = []
    for first, last, kind, count in d.nonfinite:
        members = [(s, v) for s, v in inside if first <= s <= last]
        assert len(members) == count and all(not math.isfinite(v) and _kind(v) == kind for _, v in members)
        from_runs += [(s, kind) for s, _ in members]
    assert from_runs == bad
    # And the whole document is valid JSON (no bare NaN).
    json.loads(json.dumps(d.to_json(), allow_nan=False))


def test_a_single_spike_in_100k_points_survives_1000_buckets() -> None:
    steps = np.arange(100_000)
    vals = np.ones(100_000)
    vals[73_210] = 1e9
    vals[50_000] = math.nan
    d = downsample(steps, vals, px=1000)
    assert not d.raw and len(d.steps) == 1000
    assert max(v for v in d.max if v is not None) == 1e9
    assert d.nonfinite == [(50_000, 50_000, "NaN", 1)]
    assert d.steps[-1] == 99_999


def test_encoding_round_trips_and_rejects_bad_px() -> None:
    for v in (math.nan, math.inf, -math.inf, 1.5):
        out = decode(encode(v))
        assert out is not None and (math.isnan(out) if math.isnan(v) else out == v)
    assert encode(None) is None and encode(float("inf")) == "Infinity"
    with pytest.raises(ValueError, match="px"):
        downsample(np.arange(3), np.zeros(3), px=0)
