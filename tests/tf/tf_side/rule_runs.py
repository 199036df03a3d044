"""TF1-graph runs for the built-in rules' verdicts (runs in the TensorFlow venv).

usage: python rule_runs.py OUT_BASE   → OUT_BASE/<run>/ trials, each 30 TRAIN steps of a linear
regression through murphy's SessionHook (weights, gradients, losses saved every step):

* ``healthy``: a sensible learning rate; nothing should fire;
* ``frozen``: learning rate 0 on one fixed batch: the loss and the weights never change;
* ``tiny``: inputs scaled by 1e-9: gradients vanish;
* ``zeros``: zero weights on zero inputs: every tensor is all zeros.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tensorflow.compat.v1 as tf

import murphy.hook.tensorflow as smd

tf.disable_v2_behavior()
STEPS = 30


def run(out_dir: Path, lr: float, scale: float, w_init: float, fixed: bool, include_workers: str = "one") -> None:
    with tf.Graph().as_default():
        hook = smd.SessionHook(out_dir=str(out_dir), include_collections=["weights", "gradients", "losses"],
                               save_config=smd.SaveConfig(save_interval=1), include_workers=include_workers,
                               # Ranks finish at different times: the test writes the end marker
                               # once both are done (as the platform does after its last sync).
                               write_end_marker=include_workers == "one")
        with tf.name_scope("initialize"):
            x = tf.placeholder(shape=(None, 2), dtype=tf.float32)
            w = tf.Variable(initial_value=[[w_init], [w_init]], name="weight1")
        with tf.name_scope("multiply"):
            y = tf.matmul(x, [[1.0], [1.0]])
            y_hat = tf.matmul(x, w)
        with tf.name_scope("loss"):
            loss = tf.reduce_mean((y_hat - y) ** 2, name="loss")
            hook.add_to_collection("losses", loss)
        opt = hook.wrap_optimizer(tf.train.GradientDescentOptimizer(lr))
        train_op = opt.minimize(loss)
        hook.set_mode(smd.modes.TRAIN)
        rng = np.random.default_rng(0)
        batch = rng.random((10, 2))
        with tf.train.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(STEPS):
                xs = (batch if fixed else rng.random((10, 2))) * scale
                sess.run([loss, train_op], {x: xs})
        hook.close()


if __name__ == "__main__":
    base = Path(sys.argv[1])
    if len(sys.argv) > 2 and sys.argv[2] == "--worker":
        # One rank (RANK / WORLD_SIZE from the environment) of a 2-worker run.
        run(base, lr=0.3, scale=1.0, w_init=3.0, fixed=False, include_workers="all")
        sys.exit(0)
    run(base / "healthy", lr=0.3, scale=1.0, w_init=3.0, fixed=False)
    run(base / "frozen", lr=0.0, scale=1.0, w_init=3.0, fixed=True)
    run(base / "tiny", lr=0.3, scale=1e-9, w_init=3.0, fixed=False)
    run(base / "zeros", lr=0.3, scale=0.0, w_init=0.0, fixed=False)
    print("ok", flush=True)
