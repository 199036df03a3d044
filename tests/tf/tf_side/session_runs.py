"""TF1-graph training runs written by murphy's SessionHook (runs in the TensorFlow venv).

usage: python session_runs.py OUT_BASE   → OUT_BASE/<run>/ (a trial) + OUT_BASE/<run>.truth.npz

Runs (each in a fresh graph, one process so TensorFlow is imported once):
* ``modes``: 2 dense layers (``dense/kernel``, ``dense/bias`` style variables), Adam through
  ``wrap_optimizer``, 5 TRAIN steps then 3 EVAL steps (loss only: the labels are fed, the
  optimizer is not run), a regex collection over graph tensors, ``optimizer_variables`` and a
  scalar; every tensor saved raw.
* ``reductions``: the same model, reductions only (no raw tensors).
* ``resource``: the ``modes`` model with resource variables (``use_resource=True``, what a graph
  built without ``disable_v2_behavior()`` has): they are weights and biases like reference ones.
* ``unfed``: a tensor that needs a placeholder the run does not feed is skipped, not an error.
The truth file holds, per step, the loss each ``sess.run`` returned.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tensorflow.compat.v1 as tf

import murphy.hook.tensorflow as smd

tf.disable_v2_behavior()
TRAIN_STEPS, EVAL_STEPS = 5, 3


def model(resource: bool = False) -> tuple[object, object, object, object]:
    x = tf.placeholder(tf.float32, shape=(None, 3), name="x")
    y = tf.placeholder(tf.float32, shape=(None, 1), name="y")
    if resource:
        with tf.variable_scope(tf.get_variable_scope(), use_resource=True):
            return _layers(x, y)
    return _layers(x, y)


def _layers(x: object, y: object) -> tuple[object, object, object, object]:
    with tf.variable_scope("dense"):
        w1 = tf.get_variable("kernel", initializer=tf.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)))
        b1 = tf.get_variable("bias", initializer=tf.zeros([4]))
        h = tf.nn.relu(tf.matmul(x, w1) + b1, name="relu")
    with tf.variable_scope("dense_1"):
        w2 = tf.get_variable("kernel", initializer=tf.constant(np.linspace(0.5, -0.5, 4, dtype=np.float32).reshape(4, 1)))
        b2 = tf.get_variable("bias", initializer=tf.constant([0.1]))
        out = tf.add(tf.matmul(h, w2), b2, name="out")
    with tf.name_scope("loss"):
        loss = tf.reduce_mean(tf.square(out - y), name="loss")
    return x, y, loss, out


def batch(step: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(step)
    xs = rng.normal(size=(8, 3)).astype(np.float32)
    return xs, xs.sum(axis=1, keepdims=True).astype(np.float32)


def train(out_dir: Path, reduction_config: smd.ReductionConfig | None, resource: bool = False) -> list[float]:
    losses: list[float] = []
    with tf.Graph().as_default():
        hook = smd.SessionHook(
            out_dir=str(out_dir),
            include_collections=["weights", "biases", "gradients", "losses", "optimizer_variables", "relus"],
            save_config=smd.SaveConfig(save_interval=1),
            reduction_config=reduction_config,
        )
        hook.get_collection("relus").include("relu")
        x, y, loss, _ = model(resource)
        hook.add_to_collection("losses", loss)
        opt = hook.wrap_optimizer(tf.train.AdamOptimizer(0.05))
        train_op = opt.minimize(loss)
        hook.set_mode(smd.modes.TRAIN)
        with tf.train.MonitoredSession(hooks=[hook]) as sess:
            for step in range(TRAIN_STEPS):
                xs, ys = batch(step)
                value, _ = sess.run([loss, train_op], {x: xs, y: ys})
                hook.save_scalar("lr", 0.05)
                losses.append(float(value))
            hook.set_mode(smd.modes.EVAL)
            for step in range(EVAL_STEPS):
                xs, ys = batch(100 + step)
                losses.append(float(sess.run(loss, {x: xs, y: ys})))
        hook.close()
    return losses


def unfed(out_dir: Path) -> None:
    with tf.Graph().as_default():
        hook = smd.SessionHook(out_dir=str(out_dir), include_regex=["^out:0$", "^side:0$"],
                               save_config=smd.SaveConfig(save_interval=1))
        x, y, loss, out = model()
        z = tf.placeholder(tf.float32, shape=(), name="z")
        tf.multiply(out, z, name="side")
        with tf.train.MonitoredSession(hooks=[hook]) as sess:
            for step in range(2):
                xs, ys = batch(step)
                sess.run(loss, {x: xs, y: ys})  # z is not fed: "side:0" cannot be saved
            sess.run(loss, {x: xs, y: ys, z: 2.0})  # now it can
        hook.close()


if __name__ == "__main__":
    base = Path(sys.argv[1])
    base.mkdir(parents=True, exist_ok=True)
    np.savez(base / "modes.truth.npz", loss=np.array(train(base / "modes", None)))
    red = smd.ReductionConfig(reductions=["min", "max", "mean"], abs_reductions=["mean"], norms=["l2"])
    np.savez(base / "reductions.truth.npz", loss=np.array(train(base / "reductions", red)))
    np.savez(base / "resource.truth.npz", loss=np.array(train(base / "resource", None, resource=True)))
    unfed(base / "unfed")
    print("ok", flush=True)
