"""Min/max bucket downsampling of a step series, and the JSON encoding of non-finite numbers.

A chart ``px`` pixels wide cannot show more than ``px`` columns, so the window ``[x0, x1]`` is
cut into ``px`` equal step ranges and each non-empty one keeps its first step, last step, last
value, and the minimum and maximum of its finite values. Nothing is sampled: a spike is always
some bucket's min or max, and the window's last point is always the last bucket's. NaN and
±Inf are not numbers a chart can place, so they are kept apart, losslessly, as runs of
consecutive points of one kind (``[first_step, last_step, kind, count]``): a series that goes
NaN at step 2 and stays NaN for 100k steps costs one run, not 100k entries.

JSON has no NaN: ``json.dumps`` writes ``NaN`` (which browsers reject) and FastAPI raises. Every
number leaves through :func:`encode`, which writes non-finite values as the strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"`` (what JavaScript's ``Number()`` parses back).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: codes of the non-finite kinds in runs (0 is finite)
KINDS = {1: "NaN", 2: "Infinity", 3: "-Infinity"}


def encode(value: float | None) -> float | str | None:
    """``value`` as JSON can carry it (see the module docstring)."""
    if value is None:
        return None
    v = float(value)
    if math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


def decode(value: float | str | None) -> float | None:
    """The inverse of :func:`encode` (tests and clients)."""
    return None if value is None else float(value)


def kind_codes(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    codes = np.zeros(values.shape, dtype=np.int8)
    codes[np.isnan(values)] = 1
    codes[np.isposinf(values)] = 2
    codes[np.isneginf(values)] = 3
    return codes


@dataclass
class Downsampled:
    """One window of a series. Bucket ``i`` holds the points with ``first[i] <= step <= steps[i]``."""

    steps: list[int] = field(default_factory=list)     # each bucket's last step (the x of the line)
    first: list[int] = field(default_factory=list)     # each bucket's first step
    last: list[float] = field(default_factory=list)    # the value at ``steps[i]`` (may be non-finite)
    min: list[float | None] = field(default_factory=list)  # finite min of the bucket, None if none
    max: list[float | None] = field(default_factory=list)
    nonfinite: list[tuple[int, int, str, int]] = field(default_factory=list)
    points: int = 0                                    # points in the window before downsampling
    raw: bool = True                                   # every point is its own bucket

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps, "first": self.first,
            "last": [encode(v) for v in self.last],
            "min": [encode(v) for v in self.min], "max": [encode(v) for v in self.max],
            "nonfinite": [list(r) for r in self.nonfinite],
            "points": self.points, "raw": self.raw,
        }


def nonfinite_runs(steps: np.ndarray[Any, Any], values: np.ndarray[Any, Any]) -> list[tuple[int, int, str, int]]:
    """Runs of consecutive points of one non-finite kind, in step order."""
    codes = kind_codes(values)
    if not codes.any():
        return []
    change = np.flatnonzero(np.diff(codes)) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change, [len(codes)]))
    return [(int(steps[s]), int(steps[e - 1]), KINDS[int(codes[s])], int(e - s))
            for s, e in zip(starts.tolist(), ends.tolist(), strict=False) if codes[s]]


def downsample(steps: np.ndarray[Any, Any], values: np.ndarray[Any, Any],
               x0: int | None = None, x1: int | None = None, px: int = 1000) -> Downsampled:
    """``steps`` sorted ascending, unique; ``values`` float, same length. ``px`` >= 1."""
    if px < 1:
        raise ValueError("px must be at least 1")
    steps = np.asarray(steps, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    lo = 0 if x0 is None else int(np.searchsorted(steps, x0, side="left"))
    hi = len(steps) if x1 is None else int(np.searchsorted(steps, x1, side="right"))
    s, v = steps[lo:hi], values[lo:hi]
    out = Downsampled(points=len(s), nonfinite=nonfinite_runs(s, v))
    if len(s) == 0:
        return out
    finite = np.isfinite(v)
    if len(s) <= px:
        out.steps = out.first = s.tolist()
        out.last = v.tolist()
        fv: list[float | None] = [x if ok else None for x, ok in zip(v.tolist(), finite.tolist(), strict=False)]
        out.min, out.max = fv, list(fv)
        return out
    out.raw = False
    start = int(s[0]) if x0 is None else int(x0)
    stop = int(s[-1]) if x1 is None else int(x1)
    width = (stop - start + 1) / px
    ids = np.minimum(((s - start) / width).astype(np.int64), px - 1)
    starts = np.concatenate(([0], np.flatnonzero(np.diff(ids)) + 1))
    ends = np.concatenate((starts[1:], [len(s)])) - 1
    lows = np.minimum.reduceat(np.where(finite, v, np.inf), starts)
    highs = np.maximum.reduceat(np.where(finite, v, -np.inf), starts)
    has = np.add.reduceat(finite.astype(np.int64), starts) > 0
    out.steps, out.first = s[ends].tolist(), s[starts].tolist()
    out.last = v[ends].tolist()
    out.min = [x if ok else None for x, ok in zip(lows.tolist(), has.tolist(), strict=False)]
    out.max = [x if ok else None for x, ok in zip(highs.tolist(), has.tolist(), strict=False)]
    return out
