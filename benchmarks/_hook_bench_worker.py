"""One interpreter's half of benchmarks/hook_overhead.py: trains the same small CNN on CPU without a
hook and with ``--impl``'s hook (murphy's or the real smdebug's; this file is run by the smdebug
venv's python for smdebug and never imports murphy then), interleaved and repeated, and prints one
JSON document of per-run ms/step and per-step time inside hook callbacks.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

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
    "everything/1": (1, ["losses", "weights", "biases", "gradients"], {"save_raw_tensor": True}, True),
}


class Net(nn.Module):
    """MNIST-sized CNN: 2 conv blocks + 2 linear layers (~30k parameters)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3)
        self.relu1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.relu2 = nn.ReLU()
        self.pool2 = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(16 * 5 * 5, 64)
        self.relu3 = nn.ReLU()
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(self.relu1(self.conv1(x)))
        x = self.pool2(self.relu2(self.conv2(x)))
        return self.fc2(self.relu3(self.fc1(torch.flatten(x, 1))))


def _api(impl: str) -> tuple[Any, Any, Any, Any]:
    if impl == "smdebug":
        import smdebug.pytorch as smd

        return smd.Hook, smd.SaveConfig, smd.ReductionConfig, smd.modes
    from murphy.core import ModeKeys, ReductionConfig, SaveConfig
    from murphy.hook.torch import Hook

    return Hook, SaveConfig, ReductionConfig, ModeKeys


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


def train(steps: int, impl: str | None, row: str | None, timer: CallbackTimer | None = None) -> dict[str, Any]:
    """One run; returns ms/step (hook close included) and, with a timer, per-step callback times."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    data = [(torch.randn(BATCH, 1, 28, 28, generator=gen), torch.randint(0, 10, (BATCH,), generator=gen)) for _ in range(8)]
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    hook, out_dir = None, None
    if impl is not None and row is not None:
        Hook, SaveConfig, ReductionConfig, modes = _api(impl)
        interval, colls, red, save_all = ROWS[row]
        out_dir = tempfile.mkdtemp(prefix=f"bench-{impl}-")
        hook = Hook(out_dir=out_dir + "/run", save_config=SaveConfig(save_interval=interval),
                    reduction_config=ReductionConfig(**red), include_collections=colls, save_all=save_all)
        hook.register_module(model)
        hook.register_loss(loss_fn)
        hook.set_mode(modes.TRAIN)
    per_step: list[float] = []
    t0 = 0.0
    for i in range(WARMUP + steps):
        if i == WARMUP:
            t0 = time.perf_counter()
        if timer is not None:
            timer.acc = 0.0
        x, y = data[i % len(data)]
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if timer is not None and i >= WARMUP:
            per_step.append(timer.acc)
    t_close = time.perf_counter()
    if hook is not None:
        hook.close()
    t1 = time.perf_counter()
    if out_dir is not None:
        shutil.rmtree(out_dir, ignore_errors=True)
    return {"ms_per_step": (t1 - t0) * 1e3 / steps, "close_ms": (t1 - t_close) * 1e3, "callback_ms": [x * 1e3 for x in per_step]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["murphy", "smdebug"], required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
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
        result["rows"][row] = {
            "no_hook_ms": base, "hook_ms": hooked, "close_ms": timed["close_ms"],
            "callback_mean_ms": float(cb.mean()) + timed["close_ms"] / len(cb),
            "callback_p50_ms": float(np.percentile(cb, 50)), "callback_p99_ms": float(np.percentile(cb, 99)),
            "callback_max_ms": float(cb.max()),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
