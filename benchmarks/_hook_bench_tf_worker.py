"""TensorFlow side of benchmarks/hook_overhead_tf.py (runs in the TF venv; prints one JSON line).

For each model ("tf1": a TF1 graph MLP in a MonitoredSession; "keras": a Keras 3 MLP in fit) and
each row, a plain and a hooked model train side by side, taking turns in rounds of ``N`` steps
(one saving step per round when the row saves every N steps); per round the ratio of the hooked
round's wall time to the plain round's. The hook's background writer runs during the hooked round,
so its CPU competes with training there. "in-hook" is the mean time per non-saving step spent in
the hook's own callbacks (before_run/after_run, on_train_batch_begin/end).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras
import tensorflow as tf

import murphy.hook.tensorflow as smd

ROWS: dict[str, dict[str, Any]] = {
    "losses+reductions/100": {"interval": 100, "collections": ["losses"],
                              "reductions": smd.ReductionConfig(reductions=["mean", "max"], norms=["l2"])},
    "weights+grads/100": {"interval": 100, "collections": ["weights", "biases", "gradients", "losses"]},
    "everything/1": {"interval": 1, "collections": ["weights", "biases", "gradients", "losses", "optimizer_variables", "metrics"]},
}
BATCH, FEATURES, HIDDEN = 64, 32, 64


def _hook(cls: Any, row: dict[str, Any], out: str) -> Any:
    return cls(out_dir=out, save_config=smd.SaveConfig(save_interval=row["interval"]),
               include_collections=row["collections"], reduction_config=row.get("reductions"))


def _timed(obj: Any, names: list[str], acc: list[float]) -> None:
    """Accumulate the wall time of obj's methods ``names`` into acc[0] (per-instance wrappers)."""
    for name in names:
        fn = getattr(obj, name)

        def wrapper(*a: Any, _fn: Callable[..., Any] = fn, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                acc[0] += time.perf_counter() - t

        setattr(obj, name, wrapper)


def tf1_trainer(hook: Any) -> tuple[Callable[[], None], Callable[[], None]]:
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, (None, FEATURES))
        y = v1.placeholder(tf.float32, (None, 1))
        with v1.variable_scope("dense"):
            w1 = v1.get_variable("kernel", (FEATURES, HIDDEN))
            b1 = v1.get_variable("bias", (HIDDEN,), initializer=v1.zeros_initializer())
        with v1.variable_scope("dense_1"):
            w2 = v1.get_variable("kernel", (HIDDEN, 1))
            b2 = v1.get_variable("bias", (1,), initializer=v1.zeros_initializer())
        out = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
        loss = tf.reduce_mean(tf.square(out - y), name="loss")
        opt = v1.train.AdamOptimizer(1e-3)
        if hook is not None:
            hook.add_to_collection("losses", loss)
            opt = hook.wrap_optimizer(opt)
        train = opt.minimize(loss)
        sess = v1.train.MonitoredSession(hooks=[hook] if hook is not None else [])
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(BATCH, FEATURES)).astype(np.float32)
    ys = xs[:, :1].copy()

    def step() -> None:
        sess.run([loss, train], {x: xs, y: ys})

    return step, sess.close


def keras_trainer(hook: Any, steps: int) -> tuple[Callable[[], None], Callable[[], None]]:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(HIDDEN, activation="relu"),
                              keras.layers.Dense(1)])
    opt = keras.optimizers.Adam(1e-3)
    if hook is not None:
        opt = hook.wrap_optimizer(opt)
    model.compile(optimizer=opt, loss="mse")
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(BATCH * steps, FEATURES)).astype(np.float32)
    ys = xs[:, :1].copy()
    callbacks = [hook] if hook is not None else []

    def round_() -> None:  # one epoch = one round of `steps` batches
        model.fit(xs, ys, batch_size=BATCH, epochs=1, verbose=0, shuffle=False, callbacks=callbacks)

    return round_, lambda: None


def bench(model: str, row: dict[str, Any], rounds: int, n: int) -> dict[str, Any]:
    out = tempfile.mkdtemp(prefix="murphy-tf-bench-")
    cls = smd.SessionHook if model == "tf1" else smd.KerasHook
    hook = _hook(cls, row, out)
    acc = [0.0]
    _timed(hook, ["before_run", "after_run"] if model == "tf1" else ["on_train_batch_begin", "on_train_batch_end"], acc)
    if model == "tf1":
        plain_step, plain_close = tf1_trainer(None)
        hook_step, hook_close = tf1_trainer(hook)

        def plain_round() -> None:
            for _ in range(n):
                plain_step()

        def hook_round() -> None:
            for _ in range(n):
                hook_step()
    else:
        plain_round, plain_close = keras_trainer(None, n)
        hook_round, hook_close = keras_trainer(hook, n)
    plain_round(), hook_round()  # warm up (tracing, first saves)
    acc[0] = 0.0
    ratios, plain_ms, hook_ms = [], [], []
    for i in range(rounds):
        # Alternate which side goes first, so order effects (caches, the writer finishing the
        # previous saving round) cancel out over rounds.
        order = (plain_round, hook_round) if i % 2 == 0 else (hook_round, plain_round)
        times = {}
        for fn in order:
            t = time.perf_counter()
            fn()
            times[fn] = time.perf_counter() - t
        p, h = times[plain_round], times[hook_round]
        ratios.append(h / p)
        plain_ms.append(1000 * p / n)
        hook_ms.append(1000 * h / n)
    in_hook_total = acc[0]
    hook.close()
    plain_close(), hook_close()
    # In-hook time per non-saving step: a run that never saves (interval beyond the run).
    quiet = _hook(cls, dict(row, interval=10**9), tempfile.mkdtemp(prefix="murphy-tf-bench-"))
    qacc = [0.0]
    _timed(quiet, ["before_run", "after_run"] if model == "tf1" else ["on_train_batch_begin", "on_train_batch_end"], qacc)
    if model == "tf1":
        qstep, qclose = tf1_trainer(quiet)
        qstep()
        qacc[0] = 0.0
        for _ in range(n * 5):
            qstep()
        qsteps = n * 5
        qclose()
    else:
        qround, _ = keras_trainer(quiet, n)
        qround()
        qacc[0] = 0.0
        for _ in range(5):
            qround()
        qsteps = n * 5
    quiet.close()
    return {"ratios": ratios, "plain_ms": plain_ms, "hook_ms": hook_ms,
            "in_hook_ms_per_step": 1000 * in_hook_total / (rounds * n),
            "quiet_in_hook_us": 1e6 * qacc[0] / qsteps}


if __name__ == "__main__":
    rounds, n = int(sys.argv[1]), int(sys.argv[2])
    result = {m: {name: bench(m, row, rounds, n) for name, row in ROWS.items()} for m in ("tf1", "keras")}
    result["versions"] = {"tensorflow": tf.__version__, "keras": keras.__version__}
    print(json.dumps(result), flush=True)
