"""Keras 3 and GradientTape runs written by murphy's KerasHook (runs in the TensorFlow venv).

usage: python keras_runs.py OUT_BASE   → OUT_BASE/<run>/ (trials) + OUT_BASE/<run>.truth.npz

* ``fit`` / ``fit_jit``: ``model.fit`` with validation data (TRAIN and EVAL batches), gradients
  through ``wrap_optimizer``, layer outputs through ``save_layer_outputs``; ``fit_jit`` compiles
  the train step with XLA (``jit_compile=True``); ``fit_every3`` / ``fit_every3_jit`` save every
  third batch only (the gradient copy runs on saving batches only); ``fit_every3_eager`` too, with
  ``run_eagerly=True`` (the capture train function then runs the copies eagerly);
* ``tape``: a custom eager loop through ``hook.wrap_tape(tape)`` plus ``save_tensor``; the truth
  file holds the loss and gradients the loop itself got.
"""

from __future__ import annotations

import sys
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

import murphy.hook.tensorflow as smd

EPOCHS, N, BATCH = 2, 32, 8


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 4)).astype(np.float32)
    return x, (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)).astype(np.float32)


def model() -> keras.Model:
    keras.utils.set_random_seed(1)
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="relu", name="dense"),
                             keras.layers.Dense(1, name="dense_1")], name="net")


def fit(out_dir: Path, jit: bool, interval: int = 1, eager: bool = False) -> None:
    hook = smd.KerasHook(out_dir=str(out_dir), save_config=smd.SaveConfig(save_interval=interval),
                         include_collections=["weights", "biases", "gradients", "losses", "metrics", "outputs"])
    m = model()
    opt = hook.wrap_optimizer(keras.optimizers.Adam(0.01))
    hook.save_layer_outputs(m)
    m.compile(optimizer=opt, loss="mse", metrics=["mae"], jit_compile=jit, run_eagerly=eager)
    x, y = data()
    history = m.fit(x, y, batch_size=BATCH, epochs=EPOCHS, validation_data=(x[:16], y[:16]),
                    callbacks=[hook], verbose=0, shuffle=False)
    assert not any(k.startswith("__murphy") for k in history.history), history.history.keys()
    # The capture train function stood in for saving batches only: Keras' own one is back.
    assert hook._capture_fn is not None and m.train_function is hook._capture_fn[0]
    # What the shadow gradients hold after the run: the last *saving* batch's (the test checks).
    shadows = {f"shadow|{v.path}".replace("/", "~"): s.numpy() for v, s, _n in hook._shadows.values()}
    hook.close()
    np.savez(str(out_dir) + ".truth.npz", loss=np.array(history.history["loss"]), **shadows)


def tape(out_dir: Path) -> None:
    hook = smd.KerasHook(out_dir=str(out_dir), save_config=smd.SaveConfig(save_interval=1),
                         include_collections=["weights", "biases", "gradients", "losses", "custom"])
    m = model()
    opt = keras.optimizers.SGD(0.01)
    x, y = data()
    truth: dict[str, np.ndarray] = {}
    for step in range(4):
        xb, yb = x[step * BATCH:(step + 1) * BATCH], y[step * BATCH:(step + 1) * BATCH]
        with hook.wrap_tape(tf.GradientTape()) as t:
            loss = tf.reduce_mean(tf.square(m(xb) - yb))
        grads = t.gradient(loss, m.trainable_variables)
        truth[f"loss|{step}"] = loss.numpy()
        for v, g in zip(m.trainable_variables, grads, strict=True):
            truth[f"{v.path}|{step}"] = g.numpy()
            truth[f"w:{v.path}|{step}"] = v.numpy()
        hook.save_tensor("custom/scaled_loss", loss * 2.0, "custom")
        opt.apply_gradients(zip(grads, m.trainable_variables, strict=True))
    hook.close()
    np.savez(str(out_dir) + ".truth.npz", **{k.replace("/", "~"): v for k, v in truth.items()})


if __name__ == "__main__":
    base = Path(sys.argv[1])
    base.mkdir(parents=True, exist_ok=True)
    fit(base / "fit", jit=False)
    fit(base / "fit_jit", jit=True)
    fit(base / "fit_every3", jit=False, interval=3)
    fit(base / "fit_every3_jit", jit=True, interval=3)
    fit(base / "fit_every3_eager", jit=False, interval=3, eager=True)
    tape(base / "tape")
    print("ok", flush=True)
