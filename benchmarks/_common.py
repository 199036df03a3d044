"""Shared helpers for the benchmarks: the smdebug venv, subprocess JSON, table printing."""

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
