"""One interpreter's half of benchmarks/hook_overhead.py: trains the same small CNN on CPU without a
hook and with ``--impl``'s hook (murphy's or the real smdebug's; this file is run by the smdebug
venv's python for smdebug and never imports murphy then), interleaved and repeated, and prints one
JSON document of per-run ms/step and per-step time inside hook callbacks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from _bench_cnn import Net, hook_api

BATCH = 32
WARMUP = 10

# row name → (save_interval, collections, reduction kwargs, save_all)
ROWS: dict[str, tuple[int, list[str], dict[str, Any], bool]] = {
    "losses+reductions/100": (
        100,
        ["losses", "weights", "gradients"],
        {"reductions": ["min", "max", "mean"], "norms": ["l2"], "save_raw_tensor": False},
        False,
    ),
    "weights+grads/100": (100, ["losses", "weights", "biases", "gradients"], {"save_raw_tensor": True}, False),
    # The same tensors for both libraries, every step.
    "weights+grads/1": (1, ["losses", "weights", "biases", "gradients"], {"save_raw_tensor": True}, False),
    # save_all: also every layer's inputs and outputs. smdebug 1.0.34's "outputs"/"inputs"
    # collections save nothing on torch 2.x, but save_all's ".*" does: both libraries write the
    # same bytes here (the driver prints the MB each wrote and flags a difference).
    "everything/1": (1, ["losses", "weights", "biases", "gradients"], {"save_raw_tensor": True}, True),
}


class CallbackTimer:
    """Wraps every torch hook registered while active, summing the time spent inside them."""

    def __init__(self) -> None:
        self.acc = 0.0
        self._orig: list[tuple[Any, str, Any]] = []

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.acc += time.perf_counter() - t0

        return timed

    def __enter__(self) -> CallbackTimer:
        for owner, attr in ((nn.Module, "register_forward_pre_hook"), (nn.Module, "register_forward_hook"), (torch.Tensor, "register_hook")):
            orig = getattr(owner, attr)
            self._orig.append((owner, attr, orig))

            def patched(obj: Any, hook: Callable[..., Any], *a: Any, _orig: Any = orig, **kw: Any) -> Any:
                return _orig(obj, self._wrap(hook), *a, **kw)

            setattr(owner, attr, patched)
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, attr, orig in self._orig:
            setattr(owner, attr, orig)


class Job:
    """One training job: the model, its data and optimizer, and (with ``impl``) a hook on it."""

    def __init__(self, impl: str | None, row: str | None) -> None:
        torch.manual_seed(0)
        gen = torch.Generator().manual_seed(1)
        self.data = [(torch.randn(BATCH, 1, 28, 28, generator=gen), torch.randint(0, 10, (BATCH,), generator=gen))
                     for _ in range(8)]
        self.model, self.loss_fn = Net(), nn.CrossEntropyLoss()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.i = 0
        self.hook: Any = None
        self.out_dir: str | None = None
        if impl is not None and row is not None:
            Hook, SaveConfig, ReductionConfig, modes = hook_api(impl)
            interval, colls, red, save_all = ROWS[row]
            self.out_dir = tempfile.mkdtemp(prefix=f"bench-{impl}-")
            self.hook = Hook(out_dir=self.out_dir + "/run", save_config=SaveConfig(save_interval=interval),
                             reduction_config=ReductionConfig(**red), include_collections=colls, save_all=save_all)
            self.hook.register_module(self.model)
            self.hook.register_loss(self.loss_fn)
            self.hook.set_mode(modes.TRAIN)

    def step(self) -> None:
        x, y = self.data[self.i % len(self.data)]
        self.i += 1
        loss = self.loss_fn(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

    def close(self) -> int:
        """Close the hook and delete its output; returns the bytes of tensor files it wrote."""
        if self.hook is not None:
            self.hook.close()
        size = 0
        if self.out_dir is not None:
            for sub in ("events", "index"):
                for dirpath, _, files in os.walk(os.path.join(self.out_dir, "run", sub)):
                    size += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
            shutil.rmtree(self.out_dir, ignore_errors=True)
        return size


def train(steps: int, impl: str | None, row: str | None, timer: CallbackTimer | None = None) -> dict[str, Any]:
    """One run; returns ms/step (hook close included) and, with a timer, per-step callback times."""
    job = Job(impl, row)
    per_step: list[float] = []
    t0 = 0.0
    for i in range(WARMUP + steps):
        if i == WARMUP:
            t0 = time.perf_counter()
        if timer is not None:
            timer.acc = 0.0
        job.step()
        if timer is not None and i >= WARMUP:
            per_step.append(timer.acc)
    t_close = time.perf_counter()
    if job.hook is not None:
        job.hook.close()
    t1 = time.perf_counter()
    size = job.close()
    return {"ms_per_step": (t1 - t0) * 1e3 / steps, "close_ms": (t1 - t_close) * 1e3,
            "callback_ms": [x * 1e3 for x in per_step], "mb_per_step": size / 1e6 / (WARMUP + steps)}


def alternating(impl: str, row: str, rounds: int) -> list[dict[str, float]]:
    """Paired per-step estimate: a hooked job and a plain one live side by side in this interpreter
    and take turns step by step (the order within each pair alternates), so load drifts of the
    shared machine hit both alike. One round = one save interval of each (the hooked job saves
    once per round). The hook's background threads run while either job trains, so their CPU time
    over the round (process CPU minus this thread's) is charged to the hooked job: an upper bound
    on what they cost it, whichever job they slowed. Returns per-round sums in ms."""
    interval = ROWS[row][0]
    plain, hooked = Job(None, None), Job(impl, row)
    clock = time.perf_counter
    try:
        for _ in range(interval):  # warm both; the hooked job is then one interval in
            plain.step()
            hooked.step()
        out = []
        for _ in range(rounds):
            h = p = 0.0
            other0 = time.process_time() - time.thread_time()
            for i in range(interval):
                first, second = (hooked, plain) if i % 2 == 0 else (plain, hooked)
                t0 = clock()
                first.step()
                t1 = clock()
                second.step()
                t2 = clock()
                if first is hooked:
                    h, p = h + (t1 - t0), p + (t2 - t1)
                else:
                    p, h = p + (t1 - t0), h + (t2 - t1)
            other = time.process_time() - time.thread_time() - other0
            out.append({"hook_ms": h * 1e3, "plain_ms": p * 1e3, "other_threads_ms": other * 1e3})
        return out
    finally:
        hooked.close()
        plain.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["murphy", "smdebug"], required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=30,
                    help="rounds of the step-alternating estimate (rows saving every N>1 steps; 0: skip)")
    args = ap.parse_args()
    torch.set_num_threads(1)  # one core for training; the other is free for a background writer
    # Warm up long enough that the first row's baseline is not measured on a cold machine
    # (allocator, caches, CPU clock): with 50 steps row 1's no-hook time read ~15 % above row 2's.
    train(max(300, args.steps), None, None)
    result: dict[str, Any] = {"impl": args.impl, "torch": torch.__version__, "rows": {}}
    for row in ROWS:
        base, hooked = [], []
        for rep in range(args.repeats):
            order = [(None, base), (args.impl, hooked)]
            for impl, sink in order if rep % 2 == 0 else reversed(order):
                sink.append(train(args.steps, impl, row if impl else None)["ms_per_step"])
        with CallbackTimer() as timer:
            timed = train(args.steps, args.impl, row, timer)
        cb = np.array(timed["callback_ms"])
        interval = ROWS[row][0]
        result["rows"][row] = {
            "alternating": alternating(args.impl, row, args.rounds) if interval > 1 and args.rounds else [],
            "no_hook_ms": base, "hook_ms": hooked, "close_ms": timed["close_ms"],
            "callback_mean_ms": float(cb.mean()) + timed["close_ms"] / len(cb),
            "callback_p50_ms": float(np.percentile(cb, 50)), "callback_p99_ms": float(np.percentile(cb, 99)),
            "callback_max_ms": float(cb.max()), "mb_per_step": timed["mb_per_step"],
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
