"""Fixtures of the dashboard tests: the browser venv (Playwright, TensorBoard; created on first use
by infra/ci/browser_venv.sh) and Debian's chromium. Missing: skip locally, fail in CI (CI=true)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")


def _missing(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{why} (CI must run the dashboard's browser tests; .ci/run installs it)")
    pytest.skip(why)


@pytest.fixture(scope="session")
def browser_python() -> str:
    """The browser venv's python; chromium must be installed (apt-get install chromium)."""
    if not CHROMIUM.exists():
        _missing("Debian's chromium is not installed at /usr/bin/chromium")
    proc = subprocess.run(["bash", str(REPO / "infra/ci/browser_venv.sh")], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        _missing(f"the browser venv could not be built:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def artifacts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Screenshots go here: ``$MURPHY_ARTIFACTS_DIR/dashboard`` (CI keeps it), else a temp dir."""
    root = os.environ.get("MURPHY_ARTIFACTS_DIR")
    out = Path(root) / "dashboard" if root else tmp_path_factory.mktemp("dashboard-artifacts")
    out.mkdir(parents=True, exist_ok=True)
    return out
