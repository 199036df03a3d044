"""Fixtures for the TensorFlow tests: the TF 2.21 venv (built on first use by infra/ci/tf_venv.sh),
the smdebug 1.0.34 venv (reads what TF wrote), and runs written once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tf_harness as th


@pytest.fixture(scope="session")
def tf_python() -> str:
    return th.ensure_tf_venv()


@pytest.fixture(scope="session")
def smdebug_python() -> str:
    return th.compat_harness.ensure_smdebug_venv()


@pytest.fixture(scope="session")
def seed_run(tf_python: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The article's script-v2.py with its bad hyperparameters: (trial dir, its stdout)."""
    out = tmp_path_factory.mktemp("tf-seed") / "tensors"
    log = th.run_tf(tf_python, [str(th.SEED_SCRIPT), *th.BAD_ARGS, "--debug_path", str(out)])
    return out, log


@pytest.fixture(scope="session")
def session_runs(tf_python: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tf_side/session_runs.py's runs (modes, reductions, unfed)."""
    base = tmp_path_factory.mktemp("tf-session")
    th.run_tf(tf_python, [str(th.SIDE / "session_runs.py"), str(base)])
    return base


@pytest.fixture(scope="session")
def keras_runs(tf_python: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tf_side/keras_runs.py's runs (fit, fit_jit, tape)."""
    base = tmp_path_factory.mktemp("tf-keras")
    th.run_tf(tf_python, [str(th.SIDE / "keras_runs.py"), str(base)])
    return base


@pytest.fixture(scope="session")
def rule_runs(tf_python: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tf_side/rule_runs.py's runs (healthy, frozen, tiny, zeros)."""
    base = tmp_path_factory.mktemp("tf-rules")
    th.run_tf(tf_python, [str(th.SIDE / "rule_runs.py"), str(base)])
    return base
