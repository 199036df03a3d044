"""Shared helpers for the benchmarks: pinned venvs, subprocess JSON, table printing, and the
paired-ratio statistics of the hook-overhead benchmarks (median with a 90 % bootstrap interval)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

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


def fs_cost(where: str, n: int = 200) -> str:
    """Thread CPU of the format's file-system calls in ``where``: a ``mkdir`` and an
    ``open(O_CREAT)+write+close`` (µs each, median of three passes of ``n``). ext4's inode
    allocation makes them cost 10-90 µs depending on where a directory sits on the disk (measured
    on this VM: 15 µs in a fresh directory, 50-85 µs under ``/tmp``), and a hook that saves small
    steps pays them per step, so each run prints what its directory costs."""
    import os
    import shutil
    import statistics
    import tempfile
    import time

    mk, cr = [], []
    for _ in range(3):
        d = tempfile.mkdtemp(prefix="fs-probe-", dir=where)
        try:
            t = time.thread_time()
            for i in range(n):
                os.mkdir(f"{d}/{i}")
            mk.append((time.thread_time() - t) / n)
            t = time.thread_time()
            for i in range(n):
                fd = os.open(f"{d}/{i}/f", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.write(fd, b"x" * 300)
                os.close(fd)
            cr.append((time.thread_time() - t) / n)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return (f"file system in {where}: mkdir {1e6 * statistics.median(mk):.0f} µs, "
            f"create+write+close {1e6 * statistics.median(cr):.0f} µs CPU")


def bootstrap_ci(ratios: Any, resamples: int = 2000) -> tuple[float, float]:
    """90 % bootstrap interval of the median of paired ratios (hooked / plain), as overhead %.

    The seed is fixed, so a rerun over the same figures prints the same interval.
    """
    _, lo, hi = median_ci(ratios, 90.0, resamples)
    return lo, hi


def median_overhead(ratios: Any) -> tuple[float, float, float]:
    """(median overhead %, 90 % CI low, high) of paired ratios."""
    return median_ci(ratios)


def steps_ratios(rounds: list[dict[str, float]]) -> list[float]:
    """Per-round ratios of the step-alternating estimate: (hooked steps' time + the background
    threads' CPU over the round, charged in full to the hooked side) / plain steps' time."""
    return [(r["hook_ms"] + r["other_threads_ms"]) / r["plain_ms"] for r in rounds]


def verdict(target: float, lo: float, hi: float) -> str:
    """Whether a 90 % interval resolves ``overhead <= target``."""
    return "meets" if hi <= target else ("misses" if lo > target else "cannot resolve")
