"""The writer path alone, for before/after comparisons of murphy's code: snapshot + encode + write one
step of the writer_throughput CNN's weights, gradients and layer outputs (26 tensors, 4.7 MB), on one
core and one thread (no GIL hand-off), into DIR.

Side by side in one run: ``--base REV`` extracts that revision's ``service/murphy`` (``git
archive``) and runs it and the working tree's code in turns (``--rounds`` each, a fresh interpreter
per run, order alternated), then prints both trees' thread CPU ms per step of each half (medians)
and their ratio, e.g.:

    .venv/bin/python benchmarks/writer_path_ab.py /tmp 40 --base ed95718 --rounds 5

Without ``--base`` it runs the code on the path once and prints one JSON line (the driver's
worker; ``PYTHONPATH=/tmp/old/service`` still points it at another tree).

usage: python benchmarks/writer_path_ab.py DIR STEPS [--base REV] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch

from _writer_bench_worker import BATCH, Net

try:
    from murphy.hook.torch_backend import TorchBackend
except ImportError:
    from murphy.hook.torch import TorchBackend
from murphy.core.modes import ModeKeys
from murphy.hook.guard import ErrorGuard
from murphy.hook.writer import BackgroundWriter, Record, StepBatch
from murphy.storage import LocalObjectStore


def side_by_side(out_root: str, n: int, base: str, rounds: int) -> None:
    """Run ``base``'s tree and the working tree in turns and print their medians side by side."""
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    old = tempfile.mkdtemp(prefix="writer-ab-base-")
    try:
        archive = subprocess.run(["git", "-C", repo, "archive", base, "service/murphy"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
        trees = {f"base {base}": os.path.join(old, "service"), "working tree": os.path.join(repo, "service")}
        runs: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
        for r in range(rounds):
            for label in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                env = {**os.environ, "PYTHONPATH": trees[label]}
                out = subprocess.run([sys.executable, os.path.abspath(__file__), out_root, str(n)], env=env,
                                     check=True, capture_output=True, text=True).stdout
                run = json.loads(out.strip().splitlines()[-1])
                if not os.path.abspath(run["murphy"]).startswith(trees[label] + os.sep):
                    raise SystemExit(f"{label}: imported murphy from {run['murphy']}, not {trees[label]}")
                runs[label].append(run)
    finally:
        shutil.rmtree(old, ignore_errors=True)
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("snapshot_ms", "write_ms")} for k, v in runs.items()}
    (b, bm), (c, cm) = med.items()
    print(f"writer path A/B, {n} steps x {rounds} runs per tree (medians, thread CPU ms per step)")
    print(f"{'':>14} | {b:>20} | {c:>14} | ratio")
    for f in ("snapshot_ms", "write_ms"):
        print(f"{f:>14} | {bm[f]:>20.3f} | {cm[f]:>14.3f} | {cm[f] / bm[f]:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("steps", type=int)
    ap.add_argument("--base", default=None, help="a git revision to run side by side with the working tree")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.base is not None:
        side_by_side(args.dir, args.steps, args.base, args.rounds)
        return
    out_root, n = args.dir, args.steps
    torch.set_num_threads(1)
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])
    net = Net()
    outs: list[torch.Tensor] = []
    for m in net.modules():
        m.register_forward_hook(lambda m, i, o: outs.append(o))
    net(torch.randn(BATCH, 1, 28, 28)).sum().backward()
    tensors = [p.detach() for p in net.parameters()] + [p.grad for p in net.parameters() if p.grad is not None] + outs
    be = TorchBackend()
    root = tempfile.mkdtemp(dir=out_root)
    w = BackgroundWriter(LocalObjectStore(root), "worker_0", be, ErrorGuard())
    acc = [0.0, 0.0]

    def step(i: int) -> None:
        t0 = time.thread_time()
        recs = [Record(f"t{j}", be.snapshot(t)) for j, t in enumerate(tensors)]
        b = StepBatch(i, ModeKeys.TRAIN, i, recs, be.fence())
        t1 = time.thread_time()
        w._write_step(b)
        if hasattr(w, "_give_back"):  # the staging buffers go back (newer trees)
            w._give_back(b)
        acc[0] += t1 - t0
        acc[1] += time.thread_time() - t1

    for i in range(5):
        step(i)
    acc[:] = [0.0, 0.0]
    for i in range(5, 5 + n):
        step(i)
        if i % 10 == 0:
            shutil.rmtree(root + "/events", ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    import murphy

    print(json.dumps({"snapshot_ms": acc[0] / n * 1e3, "write_ms": acc[1] / n * 1e3, "murphy": murphy.__file__}))


if __name__ == "__main__":
    main()
