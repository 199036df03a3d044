"""Shared helpers for the benchmarks: pinned venvs, subprocess JSON, paired-ratio statistics, table
printing."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def smdebug_python() -> str:
    """The isolated smdebug 1.0.34 venv's python (created on first use)."""
    proc = subprocess.run(["bash", str(REPO / "infra" / "ci" / "smdebug_venv.sh")], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"cannot create the smdebug venv:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout.strip().splitlines()[-1]


def run_json(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 1800) -> dict[str, Any]:
    """Run ``cmd``; its last stdout line that is a JSON object is the result."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def machine() -> str:
    import os

    return f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    fmt = " | ".join(f"{{:>{w}}}" for w in widths)
    out = [fmt.format(*headers), "-+-".join("-" * w for w in widths)]
    out += [fmt.format(*r) for r in rows]
    return "\n".join(out)


def venv_python(script: str) -> str:
    """The python of the pinned venv ``infra/ci/<script>`` creates (idempotently) and names last."""
    proc = subprocess.run(["bash", str(REPO / "infra" / "ci" / script)], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"cannot create the venv of infra/ci/{script}:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout.strip().splitlines()[-1]


def median_ci(ratios: Any, level: float = 90.0, resamples: int = 2000) -> tuple[float, float, float]:
    """Median of paired ratios as overhead % with its bootstrap interval: (median, low, high)."""
    import numpy as np

    arr = np.asarray(ratios, dtype=float)
    rng = np.random.default_rng(0)
    medians = np.median(rng.choice(arr, size=(resamples, len(arr))), axis=1)
    tail = (100 - level) / 2
    lo, hi = np.percentile(medians, [tail, 100 - tail])
    return 100 * (float(np.median(arr)) - 1), 100 * (float(lo) - 1), 100 * (float(hi) - 1)


def load_average() -> str:
    """The 1/5/15-minute load averages, for the header of a benchmark run on a shared machine."""
    import os

    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
