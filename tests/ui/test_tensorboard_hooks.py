"""TensorBoard output of the TensorFlow hooks (KerasHook, ``wrap_tape``, SessionHook) and of the
XGBoost hook, read back with TensorBoard's own reader (the browser venv's ``tensorboard``) and
checked point by point against the tensors the same hook saved (read by ``murphy.trial``)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from murphy.trial import create_trial

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tf"))
import tf_harness as th
from test_tensorboard import read

TF_RUNS = th.SIDE / "tensorboard_runs.py"


@pytest.fixture(scope="module")
def tb_python(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("browser_python"))


def _num(v: Any) -> float:
    return float("nan") if v == "NaN" else float(v)


def _same(a: Any, b: float) -> bool:
    x = _num(a)
    return (math.isnan(x) and math.isnan(b)) or math.isclose(x, b, rel_tol=1e-6, abs_tol=1e-7)


def expected_by_run(trial_dir: Path, tensor: str) -> dict[str, list[tuple[int, np.ndarray]]]:
    """The tensor's saved values per TensorBoard run (its steps' mode), by global step."""
    trial = create_trial(str(trial_dir))
    t = trial.tensor(tensor)
    out: dict[str, list[tuple[int, np.ndarray]]] = {}
    for step in t.steps():
        mode = trial.mode(step)
        assert mode is not None
        out.setdefault(mode.name, []).append((step, np.asarray(t.value(step), dtype=np.float64)))
    return out


def assert_scalar(runs: dict[str, Any], trial_dir: Path, tag: str, tensor: str) -> None:
    expected = expected_by_run(trial_dir, tensor)
    assert expected, f"{tensor} was not saved"
    for run, points in expected.items():
        got = runs[run]["scalars"][tag]
        assert [s for s, _ in got] == [s for s, _ in points], (run, tag)
        assert all(_same(v, float(a.ravel()[0])) for (_, v), (_, a) in zip(got, points, strict=True)), (run, tag, got)


def assert_histogram(runs: dict[str, Any], trial_dir: Path, tag: str, tensor: str) -> None:
    """Every step with a finite element has a histogram of exactly those elements."""
    for run, points in expected_by_run(trial_dir, tensor).items():
        finite = [(s, a[np.isfinite(a)]) for s, a in points if np.isfinite(a).any()]
        got = runs[run]["histograms"][tag]
        assert [h[0] for h in got] == [s for s, _ in finite], (run, tag)
        for h, (_, a) in zip(got, finite, strict=True):
            assert h[1] == a.size == h[4] and _same(h[2], float(a.min())) and _same(h[3], float(a.max())), (run, tag, h)


@pytest.mark.tf
def test_keras_hook_wrap_tape_and_session_hook_write_tensorboard(tb_python: str, tmp_path: Path) -> None:
    tf_python = th.ensure_tf_venv()
    th.run_tf(tf_python, [str(TF_RUNS), "eager", str(tmp_path)])
    th.run_tf(tf_python, [str(TF_RUNS), "session", str(tmp_path)])

    # KerasHook(tensorboard_dir=...): fit's train and validation batches are two runs.
    keras, trial = read(tb_python, tmp_path / "keras" / "tb"), tmp_path / "keras" / "tensors"
    assert sorted(keras) == ["EVAL", "TRAIN"]
    assert_scalar(keras, trial, "losses/loss", "loss")
    assert_scalar(keras, trial, "metrics/mae", "mae")
    assert_histogram(keras, trial, "weights/dense/weights/net/dense/kernel:0", "dense/weights/net/dense/kernel:0")
    assert_histogram(keras, trial, "gradients/gradients/net/dense/kernelGrad", "gradients/net/dense/kernelGrad")
    assert len(keras["TRAIN"]["scalars"]["losses/loss"]) == 8 and len(keras["EVAL"]["scalars"]["losses/loss"]) == 4
    assert not any(t.startswith("gradients/") for t in keras["EVAL"]["histograms"])  # no update outside TRAIN

    # wrap_tape with export_tensorboard=True and no directory: <out_dir>/tensorboard; NaN from step 2.
    trial = tmp_path / "tape" / "tensors"
    tape = read(tb_python, trial / "tensorboard")
    assert list(tape) == ["TRAIN"]
    assert_scalar(tape, trial, "losses/loss", "loss")
    assert [s for s, _ in tape["TRAIN"]["scalars"]["losses/loss"]] == [0, 1, 2, 3]
    assert tape["TRAIN"]["scalars"]["losses/loss"][2][1] == "NaN"
    assert_histogram(tape, trial, "weights/weights/net/dense/kernel:0", "weights/net/dense/kernel:0")
    assert [h[0] for h in tape["TRAIN"]["histograms"]["weights/weights/net/dense/kernel:0"]] == [0, 1]
    assert tape["TRAIN"]["scalars"]["nonfinite/weights/net/dense/kernel:0/nan_count"] == [[2, 12.0], [3, 12.0]]

    # SessionHook configured by nothing but tensorboardoutputconfig.json: its LocalPath.
    session, trial = read(tb_python, tmp_path / "session" / "tb"), tmp_path / "session" / "tensors"
    assert sorted(session) == ["EVAL", "TRAIN"]
    assert_scalar(session, trial, "losses/loss:0", "loss:0")
    assert_histogram(session, trial, "weights/weight:0", "weight:0")
    assert [s for s, _ in session["TRAIN"]["scalars"]["losses/loss:0"]] == [0, 1, 2]
    assert [s for s, _ in session["EVAL"]["scalars"]["losses/loss:0"]] == [3, 4]


XGBOOST_SCRIPT = """
import sys
import numpy as np, xgboost
from murphy.hook import SaveConfig
from murphy.hook.xgboost import Hook
base = sys.argv[1]
rng = np.random.default_rng(0)
x = rng.normal(size=(64, 3))
y = x @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=64)
dtrain, dval = xgboost.DMatrix(x, label=y), xgboost.DMatrix(x[:16], label=y[:16])
hook = Hook(out_dir=base + "/tensors", tensorboard_dir=base + "/tb", save_config=SaveConfig(save_interval=1),
            include_collections=["metrics", "feature_importance", "average_shap", "predictions"],
            train_data=dtrain, validation_data=dval)
xgboost.train({"max_depth": 2, "eta": 0.5, "objective": "reg:squarederror"}, dtrain, num_boost_round=4,
              evals=[(dtrain, "train"), (dval, "validation")], callbacks=[hook])
hook.close()
"""


def test_xgboost_hook_writes_tensorboard(tb_python: str, tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-c", XGBOOST_SCRIPT, str(tmp_path)], check=True, capture_output=True, timeout=120)
    runs, trial = read(tb_python, tmp_path / "tb"), tmp_path / "tensors"
    assert list(runs) == ["GLOBAL"]
    for metric in ("train-rmse", "validation-rmse"):
        assert_scalar(runs, trial, f"metrics/{metric}", metric)
    assert [s for s, _ in runs["GLOBAL"]["scalars"]["metrics/train-rmse"]] == [0, 1, 2, 3]
    assert_scalar(runs, trial, "feature_importance/feature_importance/gain/f0", "feature_importance/gain/f0")
    assert_scalar(runs, trial, "average_shap/average_shap/f1", "average_shap/f1")
    assert_histogram(runs, trial, "predictions/predictions", "predictions")
