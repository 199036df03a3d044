"""How much of the training thread's added time on two cores is the writer's (issue 20's two-core
target), side by side in one run: the writer_throughput CNN (benchmarks/_writer_bench_worker.py),
pinned to two cores, in blocks that take turns:

* ``plain``: no hook;
* ``murphy``: murphy's hook saving weights + biases + gradients (``wg``) or also the layer outputs
  (``wgo``) every step, as writer_throughput.py runs it;
* ``no-files``: the same hook, whose writer thread, for each step, runs the backend's fence and
  its numpy views of the snapshots but encodes and writes nothing. What the training thread still
  carries then (its callbacks, the copier thread's hand-offs, the fences) is what it would carry
  with the writer's work moved out of the process entirely (a writer process, no GIL shared):
  the most such a change could win.
* ``copier``: the same hook with a copier thread forced on (``MURPHY_HOOK_COPIER=1``) beside its
  writer process; by default, on two cores, the fences do the copies (torch_util.copier_wanted).

Two more twins take the copier and the writer's work away altogether, to split what is left
(``--decompose``, each for ``wg``): both copy every snapshot on the training thread
(``MURPHY_HOOK_DEFERRED_COPY=0``: no copier thread, no writer process) and write nothing;

* ``hand-off``: each step still goes to the writer thread, which drops it;
* ``on-thread``: the step is dropped on the training thread (no thread ever wakes).

``on-thread`` is the hook's callbacks plus one copy of every saved byte: what a design with no
second thread at all would cost the training thread. ``hand-off`` minus ``on-thread`` is the
price of handing a step to another thread on another core, with nothing done there.

Prints, per variant, the training thread's added wall and CPU ms per step over ``plain``
(medians of the blocks), and the process's added CPU (every thread).

``--callbacks`` also times each kind of torch callback on the training thread (forward-pre,
forward, tensor, post-accumulate, optimizer-pre, end-of-backward) and prints their µs per step
and per call for every hooked variant. The timing wrapper adds a frame to every callback, so the
main table's figures are a little higher in such a run. Every job's hook is in this one process,
and torch's optimizer step pre-hook is global: each optimizer step runs every hook's fence (one
per job; in a training script with one hook, one).

usage: python benchmarks/writer_thread_share.py [--steps 30] [--rounds 7] [--tensors wg,wgo] [--decompose]
           [--callbacks] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch

import _writer_bench_worker as bench
from _common import load_average, machine, table


def _no_files(job: bench.Job) -> None:
    """Make this job's writer skip encoding and files (the instance only, not the class)."""
    writer: Any = job.hook._writer
    backend = writer._backend

    def write_step(batch: Any) -> None:
        if batch.fence is not None:
            batch.fence()
        for rec in batch.records:
            if rec.snap is not None and type(rec.snap) is not float:
                backend.to_numpy(rec.snap)

    writer._write_step = write_step


def _drop_steps(job: bench.Job, on_thread: bool) -> None:
    """Make this job's hook write nothing: its writer thread drops each step, or (``on_thread``)
    the step never reaches the writer thread."""
    writer: Any = job.hook._writer
    if on_thread:
        writer.submit_step = lambda batch: None
    else:
        writer._write_step = lambda batch: None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tensors", default="wg,wgo")
    ap.add_argument("--decompose", action="store_true", help="add the hand-off and on-thread twins (wg)")
    ap.add_argument("--callbacks", action="store_true",
                    help="also time each kind of torch callback (adds a wrapper frame to every callback)")
    ap.add_argument("--dir", default=None, help="where the hook writes (default: the system temp dir)")
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))[:2]
    os.sched_setaffinity(0, cores)
    torch.set_num_threads(1)
    if args.callbacks:  # before any hook registers a callback
        bench.CALLBACKS.install()
    load0 = load_average()
    scratch = tempfile.mkdtemp(prefix="writer-share-", dir=args.dir)
    try:
        jobs: dict[str, bench.Job] = {"plain": bench.Job(None, scratch, {})}
        for t in args.tensors.split(","):
            jobs[f"murphy-{t}"] = bench.Job(f"murphy-{t}", scratch, {})
            jobs[f"no-files-{t}"] = bench.Job(f"murphy-{t}", scratch, {})
            _no_files(jobs[f"no-files-{t}"])
            jobs[f"copier-{t}"] = bench.Job(f"murphyC-{t}", scratch, {})
        if args.decompose:
            for name, on_thread in (("hand-off-wg", False), ("on-thread-wg", True)):
                jobs[name] = bench.Job("murphyT-wg", scratch, {})  # copies on the training thread
                _drop_steps(jobs[name], on_thread)
        for job in jobs.values():
            bench.block(job, 5)
        blocks: dict[str, list[dict[str, float]]] = {k: [] for k in jobs}
        order = list(jobs)
        for r in range(args.rounds):
            for k in order if r % 2 == 0 else reversed(order):
                blocks[k].append(bench.block(jobs[k], args.steps))
        for job in jobs.values():
            job.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def med(k: str, field: str) -> float:
        return statistics.median(b[field] for b in blocks[k]) / args.steps

    rows = []
    for k in order[1:]:
        rows.append([k, f"{med(k, 'train_wall_ms') - med('plain', 'train_wall_ms'):+.2f}",
                     f"{med(k, 'train_cpu_ms') - med('plain', 'train_cpu_ms'):+.2f}",
                     f"{med(k, 'cpu_ms') - med('plain', 'cpu_ms'):+.2f}"])
    print(f"writer thread share — {machine()}, torch {torch.__version__} (1 thread), cores {cores}, "
          f"{args.steps} steps x {args.rounds} rounds; {load0} at the start, {load_average()} at the end\n")
    print(table(["variant", "train thread +ms/step (wall)", "train thread +CPU ms/step", "process +CPU ms/step"], rows))
    if args.callbacks:
        print("\ninside the callbacks, training thread CPU per kind (medians of the blocks; the timing wrapper "
              "adds a frame to each call, in the table above too)\n")
        print(table(["variant", "callback", "µs/step", "calls/step", "µs/call"], _callback_rows(blocks, order[1:], args.steps)))


def _callback_rows(blocks: dict[str, list[dict[str, float]]], variants: list[str], steps: int) -> list[list[str]]:
    rows = []
    for k in variants:
        for kind in bench.CallbackClock.KINDS:
            us = statistics.median(b[f"cb {kind} ms"] for b in blocks[k]) * 1e3 / steps
            calls = statistics.median(b[f"cb {kind} calls"] for b in blocks[k]) / steps
            if calls:
                rows.append([k, kind, f"{us:.0f}", f"{calls:.1f}", f"{us / calls:.1f}"])
    return rows


if __name__ == "__main__":
    main()
