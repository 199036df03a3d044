"""smdebug 1.0.34's XGBoost hook and murphy's, both directions: the same training (data, seed,
one thread) recorded by each hook is read by each trial with the same names, steps, collections
and values, except murphy's documented fixes (``full_shap/<feature>`` is that feature's column;
``trees/*`` are the whole round's trees for multi-class models). smdebug runs in its own venv
(infra/ci/smdebug_xgboost_venv.sh, xgboost-cpu 3.2.0)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import compat_harness as h
import numpy as np
import pytest
import trial_dump

pytestmark = [pytest.mark.compat, pytest.mark.slow]
SIDE = Path(__file__).resolve().parent / "xgboost_side"
VENV_SCRIPT = h.REPO / "infra" / "ci" / "smdebug_xgboost_venv.sh"
Dump = tuple[dict[str, Any], dict[str, np.ndarray]]


@pytest.fixture(scope="module")
def smdebug_xgb_python() -> str:
    proc = subprocess.run(["bash", str(VENV_SCRIPT)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"smdebug+xgboost venv creation failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout.strip().splitlines()[-1]


def _run(python: str, *args: str) -> None:
    env = h.clean_env()
    proc = subprocess.run([python, *args], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-6000:]}"


@pytest.fixture(scope="module")
def dumps(smdebug_xgb_python: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Dump]]:
    """``dumps[kind]["<writer>-by-<reader>"]`` for kind in binary, multiclass."""
    pythons = {"smdebug": smdebug_xgb_python, "murphy": sys.executable}
    out: dict[str, dict[str, Dump]] = {}
    base = tmp_path_factory.mktemp("xgb-compat")
    for kind in ("binary", "multiclass"):
        out[kind] = {}
        for writer, py in pythons.items():
            trial = base / f"{kind}-{writer}"
            _run(py, str(SIDE / "train.py"), writer, str(trial), kind)
            for reader, rpy in pythons.items():
                prefix = base / f"{kind}-{writer}-by-{reader}"
                _run(rpy, str(SIDE / "dump.py"), reader, str(trial), str(prefix))
                out[kind][f"{writer}-by-{reader}"] = trial_dump.load(prefix)
    return out


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
@pytest.mark.parametrize("writer", ["smdebug", "murphy"])
def test_both_trials_read_a_run_identically(dumps: dict[str, dict[str, Dump]], kind: str, writer: str) -> None:
    d = dumps[kind]
    assert trial_dump.compare(d[f"{writer}-by-smdebug"], d[f"{writer}-by-murphy"]) == []


def _not_fixed(key: str, kind: str) -> bool:
    return not key.startswith("full_shap/") and not (kind == "multiclass" and key.startswith("trees/"))


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
def test_murphy_writes_what_smdebug_writes(dumps: dict[str, dict[str, Dump]], kind: str) -> None:
    s, m = dumps[kind]["smdebug-by-smdebug"], dumps[kind]["murphy-by-smdebug"]
    assert s[0]["steps"] == m[0]["steps"] == [0, 5, 10]
    assert s[0]["tensor_names"] == m[0]["tensor_names"]
    assert s[0]["collections"] == m[0]["collections"]
    assert trial_dump.compare(s, m, value_filter=lambda k: _not_fixed(k, kind)) == []
    # Strings come back as strings through smdebug's reader.
    assert m[1]["hyperparameters/objective|0"].tolist() == [s[1]["hyperparameters/objective|0"][0]]
    assert m[1]["trees/ID|5"].dtype.kind == "U"


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
def test_full_shap_is_the_features_column(dumps: dict[str, dict[str, Dump]], kind: str) -> None:
    s, m = dumps[kind]["smdebug-by-smdebug"][1], dumps[kind]["murphy-by-smdebug"][1]
    keys = [k for k in s if k.startswith("full_shap/")]
    assert keys
    for key in keys:
        j = int(key.split("|")[0].removeprefix("full_shap/f"))
        np.testing.assert_array_equal(m[key], s[key][..., j])


def test_multiclass_trees_are_the_whole_round(dumps: dict[str, dict[str, Dump]]) -> None:
    s, m = dumps["multiclass"]["smdebug-by-smdebug"][1], dumps["multiclass"]["murphy-by-smdebug"][1]
    per_round = 3 * 2  # num_class x num_parallel_tree
    for step in (0, 5, 10):
        assert sorted(set(m[f"trees/Tree|{step}"].tolist())) == list(range(step * per_round, (step + 1) * per_round))
        # smdebug took the one tree whose index equals the round.
        assert set(s[f"trees/Tree|{step}"].tolist()) == {step}


