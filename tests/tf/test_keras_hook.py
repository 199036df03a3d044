"""murphy's KerasHook on Keras 3 (TF 2.21): fit with TRAIN and EVAL batches, gradients through the
wrapped optimizer instance with and without XLA, layer outputs from the train step, and the
GradientTape proxy; every run read identically by murphy's trial and smdebug 1.0.34."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tf_harness as th

from murphy.core.modes import ModeKeys
from murphy.trial import create_trial

pytestmark = pytest.mark.tf

LAYERS = {"dense": (4, 3), "dense_1": (3, 1)}
BATCH = 8


def _names(prefix: str = "") -> set[str]:
    out = {"loss", "mae", "dense/outputs", "dense_1/outputs"}
    for layer in LAYERS:
        for var in ("kernel", "bias"):
            out.add(f"{layer}/weights/net/{layer}/{var}:0")
            out.add(f"gradients/net/{layer}/{var}Grad")
    return out


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype(np.float32)
    return x, (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)).astype(np.float32)


@pytest.mark.parametrize("run", ["fit", "fit_jit", "tape"])
def test_smdebug_reads_keras_runs_as_murphy_does(run: str, keras_runs: Path, smdebug_python: str) -> None:
    # The l2 a reader computes itself from a raw matrix differs on purpose (test_session_hook).
    assert th.same_reading(keras_runs / run, smdebug_python, skip=lambda k: k.endswith("|l2")) == []


@pytest.mark.parametrize("run", ["fit", "fit_jit"])
def test_fit_names_modes_and_collections(run: str, keras_runs: Path) -> None:
    trial = create_trial(str(keras_runs / run))
    assert set(trial.tensor_names()) == _names()
    # 2 epochs x 4 training batches, then 2 validation batches after each epoch.
    assert trial.steps() == list(range(12))
    assert trial.steps(mode=ModeKeys.TRAIN) == list(range(8))
    assert trial.steps(mode=ModeKeys.EVAL) == list(range(4))
    assert [trial.mode(s).name for s in range(6)] == ["TRAIN"] * 4 + ["EVAL"] * 2
    assert set(trial.tensor_names(collection="losses")) == {"loss"}
    assert set(trial.tensor_names(collection="metrics")) == {"mae"}
    assert set(trial.tensor_names(collection="biases")) == {f"{n}/weights/net/{n}/bias:0" for n in LAYERS}
    assert set(trial.tensor_names(collection="outputs")) == {"dense/outputs", "dense_1/outputs"}
    grad = "gradients/net/dense/kernelGrad"
    assert trial.tensor(grad).steps(mode=ModeKeys.EVAL) == []
    assert trial.tensor(grad).steps(mode=ModeKeys.TRAIN) == list(range(8))
    for layer, shape in LAYERS.items():
        assert trial.tensor(f"gradients/net/{layer}/kernelGrad").value(0).shape == shape
        assert trial.tensor(f"{layer}/weights/net/{layer}/kernel:0").value(0).shape == shape
        # Outputs only for training batches (the train step returns them).
        assert trial.tensor(f"{layer}/outputs").value(0).shape == (BATCH, shape[1])
    # Keras' logs['loss'] is the epoch's running mean: the last batch's equals History's.
    with np.load(keras_runs / f"{run}.truth.npz") as z:
        history = z["loss"]
    got = [float(trial.tensor("loss").value(s, mode=ModeKeys.TRAIN)[0]) for s in (3, 7)]
    np.testing.assert_allclose(got, history, rtol=1e-6)


@pytest.mark.parametrize("run", ["fit", "fit_jit"])
def test_fit_gradients_are_the_steps_gradients(run: str, keras_runs: Path) -> None:
    """The saved gradient of the output bias is 2 * mean(prediction - y) at the weights before the
    step (the previous training batch's post-update weights), recomputed here in numpy."""
    trial = create_trial(str(keras_runs / run))
    x, y = _data()
    for step in range(1, 4):  # the first epoch's batches 1..3 (no EVAL step in between)
        w = {f"{n}/{v}": trial.tensor(f"{n}/weights/net/{n}/{v}:0").value(step - 1, mode=ModeKeys.TRAIN)
             for n in LAYERS for v in ("kernel", "bias")}
        xb, yb = x[step * BATCH:(step + 1) * BATCH], y[step * BATCH:(step + 1) * BATCH]
        hidden = np.maximum(xb @ w["dense/kernel"] + w["dense/bias"], 0)
        pred = hidden @ w["dense_1/kernel"] + w["dense_1/bias"]
        want = 2 * np.mean(pred - yb, axis=0)
        got = trial.tensor("gradients/net/dense_1/biasGrad").value(step, mode=ModeKeys.TRAIN)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(trial.tensor("dense/outputs").value(step, mode=ModeKeys.TRAIN), hidden, rtol=1e-5, atol=1e-6)


def test_xla_and_graph_fit_save_the_same_gradients(keras_runs: Path) -> None:
    plain, jit = create_trial(str(keras_runs / "fit")), create_trial(str(keras_runs / "fit_jit"))
    for layer in LAYERS:
        name = f"gradients/net/{layer}/kernelGrad"
        for step in range(8):
            a = plain.tensor(name).value(step, mode=ModeKeys.TRAIN)
            assert np.all(np.isfinite(a)) and np.any(a != 0)
            np.testing.assert_allclose(jit.tensor(name).value(step, mode=ModeKeys.TRAIN), a, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("run", "every_step"), [("fit_every3", "fit"), ("fit_every3_jit", "fit_jit"),
                                                   ("fit_every3_eager", "fit")])
def test_gradients_saved_every_third_batch_are_that_batchs(run: str, every_step: str, keras_runs: Path) -> None:
    """The gradient copy runs on saving batches only: what an every-3rd-batch run saves is that
    batch's gradient (the every-batch run's at the same step), never a stale earlier one."""
    sparse, full = create_trial(str(keras_runs / run)), create_trial(str(keras_runs / every_step))
    for layer in LAYERS:
        for var in ("kernel", "bias"):
            name = f"gradients/net/{layer}/{var}Grad"
            assert sparse.tensor(name).steps(mode=ModeKeys.TRAIN) == [0, 3, 6]
            for step in (0, 3, 6):
                np.testing.assert_allclose(sparse.tensor(name).value(step, mode=ModeKeys.TRAIN),
                                           full.tensor(name).value(step, mode=ModeKeys.TRAIN), rtol=1e-5, atol=1e-7)
            w = f"{layer}/weights/net/{layer}/{var}:0"
            np.testing.assert_array_equal(sparse.tensor(w).value(3, mode=ModeKeys.TRAIN),
                                          full.tensor(w).value(3, mode=ModeKeys.TRAIN))
    # Batch 7 (no save) ran Keras' own train function, which copies nothing: the shadows still
    # hold batch 6's gradients at the end, not batch 7's.
    with np.load(keras_runs / f"{run}.truth.npz") as z:
        for layer in LAYERS:
            name, shadow = f"gradients/net/{layer}/kernelGrad", z[f"shadow|net~{layer}~kernel"]
            np.testing.assert_allclose(shadow, full.tensor(name).value(6, mode=ModeKeys.TRAIN), rtol=1e-5, atol=1e-7)
            assert not np.allclose(shadow, full.tensor(name).value(7, mode=ModeKeys.TRAIN), rtol=1e-5, atol=1e-7)


def test_tape_proxy_saves_what_the_loop_computed(keras_runs: Path) -> None:
    trial = create_trial(str(keras_runs / "tape"))
    assert trial.steps() == list(range(4)) and trial.steps(mode=ModeKeys.TRAIN) == list(range(4))
    with np.load(keras_runs / "tape.truth.npz") as z:
        truth = {k.replace("~", "/"): z[k] for k in z.files}
    for step in range(4):
        np.testing.assert_array_equal(trial.tensor("loss").value(step), np.reshape(truth[f"loss|{step}"], (1,)))
        np.testing.assert_array_equal(trial.tensor("custom/scaled_loss").value(step).ravel(), [truth[f"loss|{step}"] * 2])
        for layer in LAYERS:
            for var in ("kernel", "bias"):
                path = f"net/{layer}/{var}"
                np.testing.assert_array_equal(trial.tensor(f"gradients/{path}Grad").value(step), truth[f"{path}|{step}"])
                np.testing.assert_array_equal(trial.tensor(f"weights/{path}:0").value(step), truth[f"w:{path}|{step}"])
    assert set(trial.tensor_names(collection="biases")) == {f"weights/net/{n}/bias:0" for n in LAYERS}
    assert set(trial.tensor_names(collection="custom")) == {"custom/scaled_loss"}
