"""Hook overhead of murphy's TensorFlow hooks: the PyTorch benchmark's MNIST-sized CNN as a TF1
graph (``MonitoredSession`` + ``SessionHook``) and in Keras 3 (``KerasHook``), each next to a plain
copy in one interpreter of the TF venv (infra/ci/tf_venv.sh); one process per model (the TF1 one
runs in graph mode, ``disable_v2_behavior()``, as TF1 scripts do). TensorFlow runs on one thread.

Rows as for PyTorch (benchmarks/hook_overhead.py): losses + reductions of weights and gradients
every 100 steps; full weights + biases + gradients every 100 steps; everything every step.
Estimates (benchmarks/_hook_bench_tf_worker.py):

* "steps" (rows 1-2): the hooked and the plain copy take turns step by step; a round is 100 steps
  of each (one saving step); overhead = (hooked steps' wall time + the hook writer thread's CPU
  over the round, charged in full) / plain steps' wall time - 1; median over rounds, 90 %
  bootstrap interval. The PyTorch benchmark's estimator, with the writer read from its own
  thread CPU clock (TensorFlow's pool threads run both copies' ops and are not the hook's).
* "steps, CPU": the same rounds with each step's CPU time (all threads but the writer) in place
  of its wall time, plus the writer's CPU: what the hook costs in CPU, insensitive to the other
  processes a shared machine runs (wall time is not: a step preempted for 10 ms moves a round's
  ratio by several percent). It misses time the hook would spend waiting, not computing.
* "runs": rounds of 100 steps of each copy in turn (wall), as before.

"in-hook" is the time per step inside the hook's callbacks relative to a plain step; "quiet" the
in-hook time of a step that saves nothing.

usage: python benchmarks/hook_overhead_tf.py [--rounds 30] [--models tf1,keras] [--json out.json]
       [worker options: --run-rounds N (whole-round estimate), --channels 8 --hidden 64 --batch 32]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, median_overhead, run_json, steps_ratios, table, verdict

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKER = str(HERE / "_hook_bench_tf_worker.py")
TARGETS = {"losses+reductions/100": 2.0, "weights+grads/100": 10.0}


def tf_python() -> str:
    proc = subprocess.run(["bash", str(REPO / "infra" / "ci" / "tf_venv.sh")], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        sys.exit(f"infra/ci/tf_venv.sh failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def _fmt(est: tuple[float, float, float] | None) -> str:
    return "-" if est is None else f"{est[0]:+.1f} [{est[1]:+.1f}, {est[2]:+.1f}]"


def cpu_ratios(rounds: list[dict[str, float]]) -> list[float]:
    return [(r["hook_cpu_ms"] + r["other_threads_ms"]) / r["plain_cpu_ms"] for r in rounds]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--n", type=int, default=100, help="steps per round of the whole-round estimate")
    ap.add_argument("--models", default="tf1,keras")
    ap.add_argument("--json")
    args, worker_args = ap.parse_known_args()
    env = dict(os.environ, PYTHONPATH=str(REPO / "service"), TF_CPP_MIN_LOG_LEVEL="2")
    python = tf_python()
    t0, load0 = time.monotonic(), os.getloadavg()
    result: dict[str, Any] = {}
    for model in args.models.split(","):
        out = run_json([python, WORKER, "--models", model, "--rounds", str(args.rounds), "--n", str(args.n),
                        *worker_args], env=env)
        result[model], result["versions"], result["shape"] = out[model], out["versions"], out["shape"]
    rows, verdicts = [], []
    for model in args.models.split(","):
        for name, r in result[model].items():
            runs = median_overhead(r["ratios"])
            alt = r["alternating"]
            wall = median_overhead(steps_ratios(alt)) if alt else None
            cpu = median_overhead(cpu_ratios(alt)) if alt else None
            plain = float(np.median(r["plain_ms"]))
            step_cpu = float(np.median([a["plain_cpu_ms"] for a in alt])) / args.n if alt else float("nan")
            writer = f"{float(np.median([a['other_threads_ms'] for a in alt])):.2f}" if alt else "-"
            rows.append([model, name, f"{plain:.2f}", f"{step_cpu:.2f}", f"{float(np.median(r['hook_ms'])):.2f}",
                         _fmt(runs), _fmt(wall), _fmt(cpu), writer,
                         f"{100 * r['in_hook_ms_per_step'] / plain:.2f}", f"{r['quiet_in_hook_us']:.1f}"])
            target = TARGETS.get(name)
            if target is None:
                continue
            for label, est in (("steps (wall)", wall), ("steps (CPU)", cpu), ("runs (wall)", runs)):
                if est is not None:
                    verdicts.append(f"{model} {name}: {label} {_fmt(est)} %: target <= {target:g} % → "
                                    f"{verdict(target, est[1], est[2])}")
    load1 = os.getloadavg()
    print(f"murphy TF hook overhead on {machine()}; TensorFlow {result['versions']['tensorflow']}, "
          f"Keras {result['versions']['keras']}; model {result['shape']}; {args.rounds} rounds x {args.n} steps; "
          f"{time.strftime('%Y-%m-%d %H:%M')}, {time.monotonic() - t0:.0f} s; load average "
          f"{load0[0]:.2f} at start, {load1[0]:.2f} at end")
    print(table(["model", "row", "no hook ms/step", "no hook CPU ms/step", "hook ms/step", "runs ovh % [90 % CI]",
                 "steps ovh % [90 % CI]", "steps CPU ovh % [90 % CI]", "writer CPU ms/round", "in-hook %",
                 "quiet step in-hook us"], rows))
    print("\n".join(verdicts))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
