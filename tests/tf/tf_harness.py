"""Subprocess plumbing for the TensorFlow tests: the TF venv (infra/ci/tf_venv.sh), scripts run in
it with this checkout's murphy first on the path, and trial dumps by murphy and by the real smdebug
(the compatibility suite's dump scripts)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

TF_DIR = Path(__file__).resolve().parent
REPO = TF_DIR.parents[1]
COMPAT_DIR = REPO / "tests" / "compat"
VENV_SCRIPT = REPO / "infra" / "ci" / "tf_venv.sh"
SIDE = TF_DIR / "tf_side"
SEED_SCRIPT = REPO / "training_images" / "examples" / "tf_seed" / "script-v2.py"
# The article's bad hyperparameters (its second estimator).
BAD_ARGS = ["--lr", "100", "--scale", "100000000000", "--steps", "10", "--debug_frequency", "1"]

if str(COMPAT_DIR) not in sys.path:
    sys.path.insert(0, str(COMPAT_DIR))

import compat_harness  # noqa: E402
import trial_dump  # noqa: E402

Dump = compat_harness.Dump


def ensure_tf_venv() -> str:
    """Create (once) the TensorFlow venv; return its python. Fails, never skips, when it cannot."""
    proc = subprocess.run(["bash", str(VENV_SCRIPT)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"TensorFlow venv creation failed:\n{proc.stdout}\n{proc.stderr[-6000:]}")
    return proc.stdout.strip().splitlines()[-1]


def tf_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A clean environment whose murphy is this checkout's (whatever checkout built the venv)."""
    env = compat_harness.clean_env(extra)
    env["PYTHONPATH"] = str(REPO / "service")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.pop("TRAINING_JOB_NAME", None)
    return env


def run_tf(python: str, args: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> str:
    """Run ``python args...`` in the TF venv; return its combined output (raises on failure)."""
    proc = subprocess.run(
        [python, *args], env=env or tf_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=timeout, cwd=str(TF_DIR),
    )
    if proc.returncode != 0:
        raise AssertionError(f"{args[0]} exited {proc.returncode}:\n{proc.stdout[-6000:]}")
    return proc.stdout


def dump(reader: str, smdebug_python: str, trial_path: str | Path, out_prefix: Path) -> Dump:
    """``reader``'s (murphy or smdebug) dump of a trial, read in a subprocess."""
    python = smdebug_python if reader == "smdebug" else sys.executable
    return compat_harness.dump(reader, python, str(trial_path), out_prefix, compat_harness.clean_env())


def same_reading(run_dir: Path, smdebug_python: str, skip: Callable[[str], bool] = lambda key: False) -> list[str]:
    """Differences between murphy's and smdebug's reading of ``run_dir`` (empty: identical);
    dump keys for which ``skip`` is true are left out on both sides (values and errors)."""
    base = run_dir.parent / f"{run_dir.name}.dumps"
    base.mkdir(exist_ok=True)
    ours = _without(dump("murphy", smdebug_python, run_dir, base / "murphy"), skip)
    theirs = _without(dump("smdebug", smdebug_python, run_dir, base / "smdebug"), skip)
    return trial_dump.compare(theirs, ours)


def _without(d: Dump, skip: Callable[[str], bool]) -> Dump:
    meta, arrays = d
    meta = dict(meta, errors={k: v for k, v in meta.get("errors", {}).items() if not skip(k)})
    return meta, {k: v for k, v in arrays.items() if not skip(k)}
