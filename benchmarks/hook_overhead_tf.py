"""Hook overhead of murphy's TensorFlow hooks: a small TF1 graph model (SessionHook) and a small
Keras 3 model (KerasHook), each without and with the hook, in the TF venv (infra/ci/tf_venv.sh).

Rows as for PyTorch (benchmarks/hook_overhead.py): losses + reductions every 100 steps; full
weights + gradients every 100 steps; everything every step. A plain and a hooked model train in
one interpreter taking turns in rounds of N steps (one saving step per round for the /100 rows);
overhead = median over rounds of (hooked round / plain round) - 1, with its 90 % bootstrap
interval (the writer thread's CPU is inside the hooked round's wall time). "in-hook" is the time
spent in the hook's callbacks per step, relative to the plain step; "quiet" the in-hook time of a
step that saves nothing.

usage: python benchmarks/hook_overhead_tf.py [--rounds 20] [--n 100] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, run_json, table

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKER = str(HERE / "_hook_bench_tf_worker.py")
TARGETS = {"losses+reductions/100": 2.0, "weights+grads/100": 10.0}


def tf_python() -> str:
    proc = subprocess.run(["bash", str(REPO / "infra" / "ci" / "tf_venv.sh")], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        sys.exit(f"infra/ci/tf_venv.sh failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def _ci(ratios: list[float]) -> tuple[float, float, float]:
    arr = np.asarray(ratios)
    rng = np.random.default_rng(0)
    medians = np.median(rng.choice(arr, size=(2000, len(arr))), axis=1)
    lo, hi = 100 * (np.percentile(medians, [5, 95]) - 1.0)
    return 100 * (float(np.median(arr)) - 1.0), float(lo), float(hi)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--json")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(REPO / "service"), TF_CPP_MIN_LOG_LEVEL="2")
    result = run_json([tf_python(), WORKER, str(args.rounds), str(args.n)], env=env)
    rows, verdicts = [], []
    for model in ("tf1", "keras"):
        for name, r in result[model].items():
            med, lo, hi = _ci(r["ratios"])
            plain = float(np.median(r["plain_ms"]))
            rows.append([model, name, f"{plain:.3f}", f"{float(np.median(r['hook_ms'])):.3f}",
                         f"{med:+.1f} [{lo:+.1f}, {hi:+.1f}]", f"{100 * r['in_hook_ms_per_step'] / plain:.2f}",
                         f"{r['quiet_in_hook_us']:.1f}"])
            if name in TARGETS:
                target = TARGETS[name]
                ok = "meets" if hi <= target else ("misses" if lo > target else "cannot resolve")
                verdicts.append(f"{model} {name}: target <= {target:g} %: {ok} (90 % interval [{lo:+.1f}, {hi:+.1f}] %)")
    print(f"murphy TF hook overhead on {machine()}; TensorFlow {result['versions']['tensorflow']}, "
          f"Keras {result['versions']['keras']}; {args.rounds} rounds x {args.n} steps")
    print(table(["model", "row", "no hook ms/step", "hook ms/step", "overhead % [90 % CI]", "in-hook %",
                 "quiet step in-hook us"], rows))
    print("\n".join(verdicts))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
