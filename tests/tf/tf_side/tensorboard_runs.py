"""TensorFlow runs with TensorBoard output on (runs in the TensorFlow venv).

usage: python tensorboard_runs.py eager|session OUT_BASE   → OUT_BASE/<run>/{tensors,tb}/

* ``eager``: ``keras``, ``model.fit`` with validation data (TRAIN and EVAL batches) through
  ``KerasHook(tensorboard_dir=...)``, gradients through ``wrap_optimizer``; ``tape``, a custom loop
  through ``hook.wrap_tape`` whose weights turn NaN at step 2 (a NaN gradient applied), with
  ``export_tensorboard=True`` and no directory (smdebug's ``<out_dir>/tensorboard``).
* ``session``: a TF1 graph through ``SessionHook`` configured only by a container's
  ``tensorboardoutputconfig.json`` (``TENSORBOARD_CONFIG_FILE_PATH``; its ``LocalPath`` is the
  logdir), 3 TRAIN then 2 EVAL steps.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np


def eager(base: Path) -> None:
    import keras
    import tensorflow as tf

    import murphy.hook.tensorflow as smd

    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)).astype(np.float32)

    def model() -> keras.Model:
        keras.utils.set_random_seed(1)
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="relu", name="dense"),
                                 keras.layers.Dense(1, name="dense_1")], name="net")

    hook = smd.KerasHook(out_dir=str(base / "keras" / "tensors"), tensorboard_dir=str(base / "keras" / "tb"),
                         save_config=smd.SaveConfig(save_interval=1),
                         include_collections=["weights", "biases", "gradients", "losses", "metrics"])
    m = model()
    m.compile(optimizer=hook.wrap_optimizer(keras.optimizers.Adam(0.01)), loss="mse", metrics=["mae"])
    m.fit(x, y, batch_size=8, epochs=2, validation_data=(x[:16], y[:16]), callbacks=[hook], verbose=0, shuffle=False)
    hook.close()

    hook = smd.KerasHook(out_dir=str(base / "tape" / "tensors"), export_tensorboard=True,
                         save_config=smd.SaveConfig(save_interval=1), include_collections=["weights", "gradients", "losses"])
    m = model()
    opt = keras.optimizers.SGD(0.01)
    for step in range(4):
        with hook.wrap_tape(tf.GradientTape()) as t:
            loss = tf.reduce_mean(tf.square(m(x[:8]) - y[:8]))
        grads = t.gradient(loss, m.trainable_variables)
        if step == 1:  # the weights are NaN from step 2 on
            grads = [g * float("nan") for g in grads]
        opt.apply_gradients(zip(grads, m.trainable_variables, strict=True))
    hook.close()


def session(base: Path) -> None:
    import tensorflow.compat.v1 as tf

    import murphy.hook.tensorflow as smd

    tf.disable_v2_behavior()
    config = base / "session" / "tensorboardoutputconfig.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"LocalPath": str(base / "session" / "tb"), "S3OutputPath": "s3://unused/tb"}))
    os.environ["TENSORBOARD_CONFIG_FILE_PATH"] = str(config)
    with tf.Graph().as_default():
        hook = smd.SessionHook(out_dir=str(base / "session" / "tensors"), save_config=smd.SaveConfig(save_interval=1),
                               include_collections=["weights", "losses"])
        xs = tf.placeholder(tf.float32, shape=(None, 3), name="x")
        w = tf.get_variable("weight", initializer=tf.constant(np.linspace(-1, 1, 3, dtype=np.float32).reshape(3, 1)))
        loss = tf.reduce_mean(tf.square(tf.matmul(xs, w) - 1.0), name="loss")
        hook.add_to_collection("weights", w)
        hook.add_to_collection("losses", loss)
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        batch = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
        hook.set_mode(smd.modes.TRAIN)
        with tf.train.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(3):
                sess.run(train_op, {xs: batch})
            hook.set_mode(smd.modes.EVAL)
            for _ in range(2):
                sess.run(loss, {xs: batch})
        hook.close()


if __name__ == "__main__":
    {"eager": eager, "session": session}[sys.argv[1]](Path(sys.argv[2]))
