"""Tiny inline-SVG charts for the rule reports (no plotting library in the rule container):
line charts over steps, horizontal bars, a heat-mapped matrix. Output is escaped SVG markup."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

W, H, PAD = 560, 260, 44
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def line_chart(series: Mapping[str, Sequence[tuple[int, float]]], title: str, ylabel: str = "") -> str:
    """One polyline per series of (step, value); non-finite values are left out."""
    pts = {k: [(s, v) for s, v in vals if math.isfinite(v)] for k, vals in series.items()}
    everything = [p for vals in pts.values() for p in vals]
    if not everything:
        return f"<p>{escape(title)}: no data.</p>"
    x0, x1 = min(p[0] for p in everything), max(p[0] for p in everything)
    y0, y1 = min(p[1] for p in everything), max(p[1] for p in everything)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)

    def xy(s: float, v: float) -> str:
        x = PAD + (s - x0) / (x1 - x0) * (W - 2 * PAD)
        y = H - PAD - (v - y0) / (y1 - y0) * (H - 2 * PAD)
        return f"{x:.1f},{y:.1f}"

    parts = [_frame(title, f"step ({x0}..{x1})", ylabel, _fmt(y0), _fmt(y1))]
    for i, (name, vals) in enumerate(sorted(pts.items())):
        color = COLORS[i % len(COLORS)]
        if vals:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" '
                         f'points="{" ".join(xy(s, v) for s, v in vals)}"/>')
        parts.append(f'<text x="{W - PAD + 4}" y="{PAD + 14 * i}" font-size="11" fill="{color}">{escape(name)}</text>')
    return _svg(parts, W + 160)


def bar_chart(values: Mapping[str, float], title: str, limit: int = 20) -> str:
    """Horizontal bars, largest first (at most ``limit``)."""
    items = sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    if not items:
        return f"<p>{escape(title)}: no data.</p>"
    top = max(v for _, v in items) or 1.0
    row = 18
    height = PAD + row * len(items) + 10
    parts = [f'<text x="{PAD}" y="20" font-size="14">{escape(title)}</text>']
    for i, (name, v) in enumerate(items):
        y = PAD + i * row
        width = max(1.0, v / top * (W - 200))
        parts.append(f'<text x="{PAD + 110}" y="{y + 12}" font-size="11" text-anchor="end">{escape(name)}</text>')
        parts.append(f'<rect x="{PAD + 116}" y="{y}" width="{width:.1f}" height="{row - 4}" fill="{COLORS[0]}"/>')
        parts.append(f'<text x="{PAD + 120 + width:.1f}" y="{y + 12}" font-size="11">{_fmt(v)}</text>')
    return _svg(parts, W + 40, height)


def matrix(cm: Sequence[Sequence[int]], title: str) -> str:
    """A confusion matrix: rows = labels, columns = predictions, cells shaded by row share."""
    n = len(cm)
    if not n:
        return f"<p>{escape(title)}: no data.</p>"
    cell = max(18, min(48, 360 // n))
    parts = [f'<text x="{PAD}" y="20" font-size="14">{escape(title)} (rows: label, columns: prediction)</text>']
    for i, row in enumerate(cm):
        total = sum(row) or 1
        for j, count in enumerate(row):
            shade = int(255 - 200 * count / total)
            x, y = PAD + j * cell, PAD + i * cell
            parts.append(f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="rgb({shade},{shade},255)" stroke="#fff"/>')
            parts.append(f'<text x="{x + cell / 2}" y="{y + cell / 2 + 4}" font-size="10" text-anchor="middle">{count}</text>')
    return _svg(parts, PAD * 2 + n * cell + 20, PAD * 2 + n * cell)


def _frame(title: str, xlabel: str, ylabel: str, ylo: str, yhi: str) -> str:
    return (f'<text x="{PAD}" y="20" font-size="14">{escape(title)}</text>'
            f'<rect x="{PAD}" y="{PAD}" width="{W - 2 * PAD}" height="{H - 2 * PAD}" fill="none" stroke="#999"/>'
            f'<text x="{W / 2}" y="{H - 10}" font-size="11" text-anchor="middle">{escape(xlabel)}</text>'
            f'<text x="4" y="{PAD + 4}" font-size="10">{escape(yhi)}</text>'
            f'<text x="4" y="{H - PAD}" font-size="10">{escape(ylo)}</text>'
            f'<text x="4" y="{H / 2}" font-size="10">{escape(ylabel)}</text>')


def _svg(parts: list[str], width: float, height: float = H) -> str:
    body = "".join(parts)
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}">{body}</svg>'
