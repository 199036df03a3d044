"""The dashboard's JSON documents, built from a :class:`TensorCache` (pure functions, no web
framework: ``murphy.api.ui_routes`` serves them). Every float leaves through ``encode``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from murphy.ui.downsample import downsample, encode
from murphy.ui.tensors import STATS, TensorCache

MAX_PX = 10_000


def check_px(px: int) -> int:
    if not 1 <= px <= MAX_PX:
        raise ValueError(f"px must be between 1 and {MAX_PX}, not {px}")
    return px


def tensors_json(cache: TensorCache, regex: str | None, collection: str | None) -> dict[str, Any]:
    names = cache.names(regex, collection)
    steps = cache.steps()
    return {"tensors": names, "collections": cache.collections(), "steps": len(steps),
            "last_step": steps[-1] if steps else None, "ended": cache.ended()}


def series_json(cache: TensorCache, tensor: str, stat: str, x0: int | None, x1: int | None, px: int,
                after: int | None = None) -> dict[str, Any]:
    """One statistic of one tensor over steps. ``after``: only the raw points past that step
    (a live chart's append); otherwise the window ``[x0, x1]`` downsampled to ``px`` buckets."""
    if stat not in STATS:
        raise ValueError(f"stat must be one of {', '.join(STATS)}, not {stat!r}")
    s = cache.series(tensor)
    steps, values = s.column(stat)
    if after is not None:
        cut = int(np.searchsorted(steps, after, side="right"))
        ds = downsample(steps[cut:], values[cut:], px=max(len(steps) - cut, 1))
    else:
        ds = downsample(steps, values, x0, x1, check_px(px))
    first = s.first_nonfinite()
    return {"tensor": tensor, "stat": stat, **ds.to_json(),
            "total": len(s.steps), "last_step": s.steps[-1] if s.steps else None,
            "first_nonfinite_step": first[0] if first else None, "ended": cache.ended()}


def reductions_json(cache: TensorCache, tensor: str, x0: int | None, x1: int | None, px: int) -> dict[str, Any]:
    s = cache.series(tensor)
    out: dict[str, Any] = {"tensor": tensor, "dtype": s.dtype,
                           "shape": list(s.shapes[-1]) if s.shapes else None, "stats": {}}
    for stat in STATS[1:]:
        steps, values = s.column(stat)
        out["stats"][stat] = downsample(steps, values, x0, x1, check_px(px)).to_json()
    return out


def nonfinite_json(cache: TensorCache) -> dict[str, Any]:
    """The first step at which each tensor held a NaN or Inf, earliest first."""
    result: dict[str, Any] = cache.memo("nonfinite", lambda: _nonfinite(cache))
    return result


def _nonfinite(cache: TensorCache) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for s in cache.all_series():
        first = s.first_nonfinite()
        if first is None:
            continue
        step, k = first
        rows.append({"tensor": s.name, "step": step,
                     "nan_count": encode(s.cols[STATS.index("nan_count")][k]),
                     "inf_count": encode(s.cols[STATS.index("inf_count")][k]),
                     "value": encode(s.cols[0][k])})
    # Ties (a NaN reaches several tensors in one step) go in the hook's write order, the order of
    # computation, so the first row is where the cascade started; unknown names go last.
    trial = cache.trial()
    order: dict[int, dict[str, int]] = {}
    for step in {r["step"] for r in rows}:
        names = trial.write_order(step) if trial is not None else []
        order[step] = {n: i for i, n in enumerate(names)}
    rows.sort(key=lambda r: (r["step"], order[r["step"]].get(r["tensor"], 1 << 30), r["tensor"]))
    return {"rows": rows, "first_step": rows[0]["step"] if rows else None}


def heatmap_json(cache: TensorCache, regex: str, stat: str, px: int) -> dict[str, Any]:
    """Layers x steps of ``stat`` (default l2): each cell the bucket's largest magnitude, so a
    layer that explodes in one step of a bucket shows; a non-finite value wins its cell."""
    check_px(px)
    if stat not in STATS:
        raise ValueError(f"stat must be one of {', '.join(STATS)}, not {stat!r}")
    result: dict[str, Any] = cache.memo(("heatmap", regex, stat, px), lambda: _heatmap(cache, regex, stat, px))
    return result


def _heatmap(cache: TensorCache, regex: str, stat: str, px: int) -> dict[str, Any]:
    series = cache.all_series(cache.names(regex))
    all_steps = sorted({st for s in series for st in s.steps})
    if not all_steps:
        return {"rows": [], "steps": [], "values": []}
    lo, hi = all_steps[0], all_steps[-1]
    nb = min(px, len(all_steps))
    width = (hi - lo + 1) / nb
    edges = [lo + math.floor(i * width) for i in range(nb)]
    values = []
    for s in series:
        steps, vals = s.column(stat)
        cells: list[float | str | None] = [None] * nb
        if len(steps):
            ids = np.minimum(((steps - lo) / width).astype(np.int64), nb - 1)
            starts = np.concatenate(([0], np.flatnonzero(np.diff(ids)) + 1))
            finite = np.isfinite(vals)
            peak = np.maximum.reduceat(np.where(finite, np.abs(vals), -np.inf), starts)
            bad = np.add.reduceat((~finite).astype(np.int64), starts)
            ends = np.concatenate((starts[1:], [len(vals)]))
            for b, p, nbad, a, e in zip(ids[starts].tolist(), peak.tolist(), bad.tolist(), starts.tolist(),
                                        ends.tolist(), strict=True):
                if nbad:  # the first non-finite value of the bucket wins its cell
                    cells[b] = encode(float(vals[a:e][~finite[a:e]][0]))
                else:
                    cells[b] = p
        values.append(cells)
    return {"rows": [s.name for s in series], "steps": edges, "values": values, "stat": stat}


def histogram_json(cache: TensorCache, tensor: str, bins: int, px: int) -> dict[str, Any]:
    """Counts of ``tensor``'s finite elements in ``bins`` equal bins over steps (the saved steps,
    at most ``px`` of them evenly spread, the last one always), with NaN/Inf counts apart."""
    if not 1 <= bins <= 512:
        raise ValueError(f"bins must be between 1 and 512, not {bins}")
    s = cache.series(tensor)
    check_px(px)
    n = len(s.steps)
    if n <= px:
        picked = list(s.steps)
    elif px == 1:
        picked = s.steps[-1:]
    else:
        picked = [s.steps[round(i * (n - 1) / (px - 1))] for i in range(px)]
    # The bins span the finite values of the steps shown (a step's min/max statistic is NaN as
    # soon as one element is, so it cannot give the range).
    arrays = [cache.value(tensor, st).astype(np.float64, copy=False).ravel() for st in picked]
    finite = [a[np.isfinite(a)] for a in arrays]
    nonempty = [f for f in finite if f.size]
    lo = min(float(f.min()) for f in nonempty) if nonempty else 0.0
    hi = max(float(f.max()) for f in nonempty) if nonempty else 1.0
    if hi <= lo:
        hi = lo + 1.0
    counts = [np.histogram(f, bins=bins, range=(lo, hi))[0].tolist() for f in finite]
    nans = [int(np.count_nonzero(np.isnan(a))) for a in arrays]
    infs = [int(np.count_nonzero(np.isinf(a))) for a in arrays]
    return {"tensor": tensor, "steps": picked, "edges": np.linspace(lo, hi, bins + 1).tolist(),
            "counts": counts, "nan": nans, "inf": infs}


def step_json(cache: TensorCache, step: int) -> dict[str, Any]:
    """Every tensor saved at ``step``: shape, dtype, statistics and the l2 change since the
    tensor's previous saved step."""
    rows = []
    for s in cache.all_series():
        if step not in s.steps:
            continue
        k = s.steps.index(step)
        row: dict[str, Any] = {"tensor": s.name, "shape": list(s.shapes[k]), "dtype": s.dtype}
        row.update({stat: encode(s.cols[i][k]) for i, stat in enumerate(STATS)})
        row["prev_step"], row["delta_l2"] = None, None
        if k > 0:
            row["prev_step"] = s.steps[k - 1]
            try:
                now, before = cache.value(s.name, step), cache.value(s.name, s.steps[k - 1])
                if now.shape == before.shape:
                    with np.errstate(all="ignore"):
                        d = (now.astype(np.float64) - before.astype(np.float64)).ravel()
                        row["delta_l2"] = encode(float(np.sqrt(np.dot(d, d))))
            except Exception:  # a value that cannot be read has no change to show
                row["delta_l2"] = None
        rows.append(row)
    return {"step": step, "tensors": rows}
