"""TensorFlow side of benchmarks/hook_overhead_tf.py (runs in the TF venv; prints one JSON line).

Two models, each trained by a plain and a hooked copy living side by side in this interpreter:
"tf1", a TF1 graph MLP run through a ``MonitoredSession`` (``SessionHook`` + ``wrap_optimizer``),
and "keras", the same MLP in Keras 3 (``KerasHook`` + ``wrap_optimizer``). TensorFlow runs on one
intra-op and one inter-op thread (as the PyTorch benchmark runs torch on one), so the second core
is free for the hook's writer thread and the two copies do not fight over a thread pool.

Per model and row, three figures:

* "steps" (rows saving every N > 1 steps): the copies take turns step by step (the order within a
  pair alternates); one round is N steps of each, in which the hooked copy saves once. Per round
  the wall time of the hooked steps, of the plain steps, and the CPU time the hook's writer
  thread(s) used over the round (read per thread from its CPU clock, so TensorFlow's own pool
  threads, which run both copies' ops, are not counted). The driver charges the writer's CPU in
  full to the hooked side, an upper bound on what it costs training.
* "runs": whole rounds of N steps of each copy, taken in turn (order alternated), wall time.
* in-hook: time inside the hook's callbacks per step (before_run/after_run; the Keras batch
  callbacks), and on a run that never saves ("quiet").

The Keras copies are trained by the loop Keras' ``fit`` runs, written out so that two models can
take turns: one ``CallbackList`` per copy (History, plus the hook on the hooked copy),
``on_train_begin``, ``on_epoch_begin``, then per step ``on_train_batch_begin`` /
``train_on_batch`` / ``on_train_batch_end(logs)``. ``train_on_batch`` calls the same compiled
``train_function`` as ``fit``; unlike ``fit`` it hands the callbacks Python floats instead of
tensors, on both copies alike.

usage: python _hook_bench_tf_worker.py [--rounds 30] [--channels 8] [--hidden 64] [--batch 32] [--models tf1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras
import tensorflow as tf

import murphy.hook.tensorflow as smd

_RED = {"reductions": ["min", "max", "mean"], "norms": ["l2"], "save_raw_tensor": False}
# The PyTorch benchmark's rows (benchmarks/_hook_bench_worker.py): row 1 saves reductions of the
# losses, weights and gradients, row 2 the full weights and gradients, row 3 everything each step.
ROWS: dict[str, dict[str, Any]] = {
    "losses+reductions/100": {"interval": 100, "collections": ["losses", "weights", "gradients"], "reductions": _RED},
    "weights+grads/100": {"interval": 100, "collections": ["losses", "weights", "biases", "gradients"]},
    "everything/1": {"interval": 1, "collections": ["losses", "weights", "biases", "gradients",
                                                    "optimizer_variables", "metrics"]},
}
NBATCHES = 8
CALLBACKS = {"tf1": ["before_run", "after_run"], "keras": ["on_train_batch_begin", "on_train_batch_end"]}


class Shape:
    """The model's size: the PyTorch benchmark's MNIST-sized CNN (conv 3x3 x ``channels``, max-pool,
    conv 3x3 x 2 ``channels``, max-pool, dense ``hidden``, dense 10), ``batch`` images per step."""

    def __init__(self, channels: int, hidden: int, batch: int) -> None:
        self.channels, self.hidden, self.batch = channels, hidden, batch

    def data(self) -> list[tuple[np.ndarray, np.ndarray]]:
        rng = np.random.default_rng(1)
        return [(rng.normal(size=(self.batch, 28, 28, 1)).astype(np.float32),
                 rng.integers(0, 10, size=(self.batch,)).astype(np.int64)) for _ in range(NBATCHES)]


def make_hook(model: str, row: dict[str, Any], out: str) -> Any:
    cls = smd.SessionHook if model == "tf1" else smd.KerasHook
    red = row.get("reductions")
    return cls(out_dir=out, save_config=smd.SaveConfig(save_interval=row["interval"]),
               include_collections=row["collections"],
               reduction_config=smd.ReductionConfig(**red) if red else None)


def time_methods(obj: Any, names: list[str], acc: list[float]) -> None:
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


class TF1Job:
    """A TF1 graph MLP in its own graph and ``MonitoredSession``; ``step()`` is one ``sess.run``."""

    def __init__(self, shape: Shape, hook: Any) -> None:
        v1 = tf.compat.v1
        self.graph = tf.Graph()
        with self.graph.as_default():
            v1.set_random_seed(0)
            self.x = v1.placeholder(tf.float32, (None, 28, 28, 1), name="x")
            self.y = v1.placeholder(tf.int64, (None,), name="y")
            h = self.x
            c1, c2 = shape.channels, 2 * shape.channels
            for i, (k_in, k_out) in enumerate([(1, c1), (c1, c2)]):
                with v1.variable_scope(f"conv2d_{i}"):
                    w = v1.get_variable("kernel", (3, 3, k_in, k_out))
                    b = v1.get_variable("bias", (k_out,), initializer=v1.zeros_initializer())
                h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(h, w, 1, "VALID") + b), 2, 2, "VALID")
            h = tf.reshape(h, (-1, 5 * 5 * c2))
            for i, (n_in, n_out) in enumerate([(5 * 5 * c2, shape.hidden), (shape.hidden, 10)]):
                with v1.variable_scope(f"dense_{i}"):
                    w = v1.get_variable("kernel", (n_in, n_out))
                    b = v1.get_variable("bias", (n_out,), initializer=v1.zeros_initializer())
                h = tf.matmul(h, w) + b
                if i == 0:
                    h = tf.nn.relu(h)
            self.loss = v1.losses.sparse_softmax_cross_entropy(self.y, h)
            opt = v1.train.AdamOptimizer(1e-3)
            if hook is not None:
                opt = hook.wrap_optimizer(opt)
            self.train = opt.minimize(self.loss)
            config = v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
            self.sess = v1.train.MonitoredSession(session_creator=v1.train.ChiefSessionCreator(config=config),
                                                  hooks=[hook] if hook is not None else [])
        self.data = shape.data()
        self.i = 0

    def step(self) -> None:
        x, y = self.data[self.i % NBATCHES]
        self.i += 1
        self.sess.run([self.loss, self.train], {self.x: x, self.y: y})

    def close(self) -> None:
        self.sess.close()


class KerasJob:
    """The same MLP in Keras 3, trained by ``fit``'s loop written out (see the module docstring)."""

    def __init__(self, shape: Shape, hook: Any, row: dict[str, Any] | None) -> None:
        keras.utils.set_random_seed(0)
        layers = keras.layers
        self.model = keras.Sequential([
            keras.Input((28, 28, 1)), layers.Conv2D(shape.channels, 3, activation="relu"), layers.MaxPooling2D(2),
            layers.Conv2D(2 * shape.channels, 3, activation="relu"), layers.MaxPooling2D(2), layers.Flatten(),
            layers.Dense(shape.hidden, activation="relu"), layers.Dense(10)])
        opt = keras.optimizers.Adam(1e-3)
        if hook is not None and row is not None and "gradients" in row["collections"]:
            opt = hook.wrap_optimizer(opt)  # gradients are opt-in in Keras (a shadow copy per step)
        self.model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        self.data = [(tf.constant(x), tf.constant(y)) for x, y in shape.data()]
        self.callbacks = keras.callbacks.CallbackList([hook] if hook is not None else [], add_history=True,
                                                      add_progbar=False, model=self.model, epochs=1)
        self.callbacks.on_train_begin()
        self.callbacks.on_epoch_begin(0)
        self.i = 0

    def step(self) -> None:
        x, y = self.data[self.i % NBATCHES]
        self.callbacks.on_train_batch_begin(self.i)
        logs = self.model.train_on_batch(x, y, return_dict=True)
        self.callbacks.on_train_batch_end(self.i, logs)
        self.i += 1

    def close(self) -> None:
        self.callbacks.on_epoch_end(0, {})
        self.callbacks.on_train_end({})


class Side:
    """One copy of a model (plain or hooked) with its hook and output directory."""

    def __init__(self, model: str, shape: Shape, row: dict[str, Any] | None, interval: int | None = None) -> None:
        self.out = tempfile.mkdtemp(prefix="murphy-tf-bench-") if row is not None else None
        self.hook = None
        if row is not None and self.out is not None:
            self.hook = make_hook(model, dict(row, interval=interval or row["interval"]), self.out)
        self.in_hook = [0.0]
        if self.hook is not None:
            time_methods(self.hook, CALLBACKS[model], self.in_hook)
        self.job: TF1Job | KerasJob = TF1Job(shape, self.hook) if model == "tf1" else KerasJob(shape, self.hook, row)
        self.step = self.job.step

    def close(self) -> None:
        self.job.close()
        if self.hook is not None:
            self.hook.close()
        if self.out is not None:
            shutil.rmtree(self.out, ignore_errors=True)


def writer_cpu() -> dict[int, float]:
    """CPU seconds of each live murphy hook thread (by its thread's CPU clock)."""
    out = {}
    for t in threading.enumerate():
        if t.name.startswith("murphy-hook") and t.ident is not None:
            try:
                out[t.ident] = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
            except (OSError, ProcessLookupError):
                continue
    return out


def writer_cpu_since(before: dict[int, float]) -> float:
    return sum(cpu - before.get(ident, 0.0) for ident, cpu in writer_cpu().items())


def alternating(model: str, shape: Shape, row: dict[str, Any], rounds: int) -> list[dict[str, float]]:
    """The "steps" estimate: per round of one save interval, hooked/plain step times and the
    writer's CPU (see the module docstring)."""
    interval = row["interval"]
    plain, hooked = Side(model, shape, None), Side(model, shape, row)
    clock = time.perf_counter
    try:
        for _ in range(interval):  # warm both (tracing, first save); the hooked copy is one interval in
            plain.step()
            hooked.step()
        out = []
        for _ in range(rounds):
            h = p = hc = pc = 0.0
            cpu0 = writer_cpu()
            clocks = [time.pthread_getcpuclockid(ident) for ident in cpu0]

            def cpu(_clocks: list[int] = clocks) -> float:  # this process's CPU time minus the writer's
                return time.process_time() - sum(time.clock_gettime(c) for c in _clocks)

            for i in range(interval):
                first, second = (hooked, plain) if i % 2 == 0 else (plain, hooked)
                t0, c0 = clock(), cpu()
                first.step()
                t1, c1 = clock(), cpu()
                second.step()
                t2, c2 = clock(), cpu()
                if first is hooked:
                    h, p, hc, pc = h + (t1 - t0), p + (t2 - t1), hc + (c1 - c0), pc + (c2 - c1)
                else:
                    p, h, pc, hc = p + (t1 - t0), h + (t2 - t1), pc + (c1 - c0), hc + (c2 - c1)
            out.append({"hook_ms": h * 1e3, "plain_ms": p * 1e3, "other_threads_ms": writer_cpu_since(cpu0) * 1e3,
                        "hook_cpu_ms": hc * 1e3, "plain_cpu_ms": pc * 1e3})
        return out
    finally:
        hooked.close()
        plain.close()


def whole_rounds(model: str, shape: Shape, row: dict[str, Any], rounds: int, n: int) -> dict[str, Any]:
    """The "runs" estimate: rounds of ``n`` steps of each copy in turn, and the in-hook times."""
    plain, hooked = Side(model, shape, None), Side(model, shape, row)
    for side in (plain, hooked):  # warm up (tracing, first saves)
        for _ in range(n):
            side.step()
    hooked.in_hook[0] = 0.0
    ratios, plain_ms, hook_ms = [], [], []
    for i in range(rounds):
        order = (plain, hooked) if i % 2 == 0 else (hooked, plain)
        times = {}
        for side in order:
            t = time.perf_counter()
            for _ in range(n):
                side.step()
            times[id(side)] = time.perf_counter() - t
        p, h = times[id(plain)], times[id(hooked)]
        ratios.append(h / p)
        plain_ms.append(1000 * p / n)
        hook_ms.append(1000 * h / n)
    in_hook = hooked.in_hook[0]
    hooked.close()
    plain.close()
    # In-hook time per non-saving step: a hook whose interval lies beyond the run.
    quiet = Side(model, shape, row, interval=10**9)
    quiet.step()
    quiet.in_hook[0] = 0.0
    for _ in range(5 * n):
        quiet.step()
    quiet_us = 1e6 * quiet.in_hook[0] / (5 * n)
    quiet.close()
    return {"ratios": ratios, "plain_ms": plain_ms, "hook_ms": hook_ms,
            "in_hook_ms_per_step": 1000 * in_hook / (rounds * n), "quiet_in_hook_us": quiet_us}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30, help="rounds of each estimate")
    ap.add_argument("--n", type=int, default=100, help="steps per round of the whole-round estimate")
    ap.add_argument("--run-rounds", type=int, help="rounds of the whole-round estimate (default: --rounds)")
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--models", default="tf1,keras")
    ap.add_argument("--rows", default=",".join(ROWS))
    args = ap.parse_args()
    if args.models == "tf1":
        # What a TF1 script does (the article's script-v2.py): graph mode, reference variables.
        # Keras needs eager mode, so the driver runs each model in its own process.
        tf.compat.v1.disable_v2_behavior()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    shape = Shape(args.channels, args.hidden, args.batch)
    result: dict[str, Any] = {"versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
                              "shape": vars(args)}
    for model in args.models.split(","):
        result[model] = {}
        for name in args.rows.split(","):
            row = ROWS[name]
            entry = whole_rounds(model, shape, row, args.run_rounds or args.rounds, args.n)
            entry["alternating"] = alternating(model, shape, row, args.rounds) if row["interval"] > 1 else []
            result[model][name] = entry
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
