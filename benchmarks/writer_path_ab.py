"""The writer path alone, for before/after comparisons of murphy's code: snapshot + encode + write one
step of the writer_throughput CNN's weights, gradients and layer outputs (26 tensors, 4.7 MB), on one
core and one thread (no GIL hand-off), into DIR; prints thread CPU ms per step of each half as JSON.

Run it with another murphy tree first on the path to compare, interleaved, e.g.:

    git archive ed95718 service/murphy | tar -x -C /tmp/old
    for r in 1 2 3; do
      PYTHONPATH=/tmp/old/service .venv/bin/python benchmarks/writer_path_ab.py /tmp 40
      .venv/bin/python benchmarks/writer_path_ab.py /tmp 40
    done

usage: python benchmarks/writer_path_ab.py DIR STEPS
"""
from __future__ import annotations

import json
import os
import shutil
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


def main() -> None:
    out_root, n = sys.argv[1], int(sys.argv[2])
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
    print(json.dumps({"snapshot_ms": acc[0] / n * 1e3, "write_ms": acc[1] / n * 1e3}))


if __name__ == "__main__":
    main()
