"""XGBoost hook overhead: xgboost.train without a hook, with murphy's hook and with the real
smdebug 1.0.34 hook (its own venv, infra/ci/smdebug_xgboost_venv.sh, same xgboost-cpu 3.2.0), at
the default collections (metrics every 10 rounds) and with every collection every 10 rounds
(SHAP on a 500-row sample of the training data).

The model: binary:logistic, 20 features, depth 6, eta 0.1, one thread, train + validation metrics
evaluated every round (as SageMaker's algorithm does), ``--boost-rounds`` rounds. A plan row is
CONFIG@ROWS; the default plan runs the defaults at 5,000 and 20,000 training rows (a hook's cost
at the defaults does not grow with the data, so its share shrinks as rounds get slower: both
sizes are printed) and every collection at 5,000 rows.

Estimator (built to survive a shared, loaded machine): each implementation runs in its own
persistent interpreter (benchmarks/_xgb_bench_worker.py); the driver alternates the two workers
round by round, and in each round a worker trains, per plan row, one plain and one hooked run
back to back (order alternated), so plain, murphy and smdebug runs are interleaved in time and
every hooked run has a plain twin next to it. Per round (median over rounds, 90 % interval):

* cpu: hooked / plain CPU time of the whole process (every thread: a hook's writer thread is
  charged in full) - 1;
* wall: the same with wall-clock time;
* in-hook: (training thread's CPU time inside the hook — construction, callbacks, close() — plus
  the CPU time of every other thread during the hooked run) / plain CPU time: the hook's own
  cost, the lowest-noise figure.

* rounds: in each round a worker also trains a plain and a hooked booster side by side with
  xgboost.train's own loop (Booster, CallbackContainer, update), taking turns boosting round by
  boosting round (order alternated); (hooked side's CPU time + every other thread's) / plain
  side's CPU time - 1, and the same with wall time. Pairing single boosting rounds cancels the
  load drifts that whole runs cannot (as benchmarks/hook_overhead.py's "steps"); the verdicts
  read this estimate.

A third worker, ``raw floor``, runs the defaults rows with a callback that makes only the format's
file-system calls at the rounds murphy saves (one directory and two files per saved round, the
bytes murphy wrote, no encoding or rename: _xgb_bench_worker.py): the share of a round that any
hook writing smdebug's layout pays on this disk. The header prints what a ``mkdir`` and a file
creation cost in the directory used (``--dir``), since ext4's cost for them varies several-fold
with the disk's activity.

Each is the median over rounds with a 90 % bootstrap interval. Targets: <= 3 % at the defaults,
murphy below smdebug in every row.

usage: python benchmarks/hook_overhead_xgb.py [--rounds 12] [--boost-rounds 100]
           [--plan defaults@5000,defaults@20000,all10@5000] [--json out.json] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

from _common import fs_cost, load_average, machine, median_ci, table, venv_python

WORKER = str(Path(__file__).resolve().parent / "_xgb_bench_worker.py")
DEFAULTS_TARGET = 3.0
IMPLS = ("murphy", "smdebug", "raw")


class Worker:
    """One implementation's persistent interpreter, driven a round at a time over stdin."""

    def __init__(self, impl: str, python: str, out: str, plan: list[dict[str, Any]]) -> None:
        self.impl = impl
        self.proc = subprocess.Popen([python, WORKER, impl, out, json.dumps(plan)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                result: dict[str, Any] = json.loads(line)
                return result
        sys.exit(f"the {self.impl} worker exited ({self.proc.wait()}) without a result")

    def round(self, i: int) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"run {i}\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin is not None and self.proc.poll() is None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def estimates(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median paired estimates (with 90 % intervals) over a row's rounds."""
    plain = [r["plain"] for r in runs]
    hook = [r["hook"] for r in runs]
    in_hook = [(h["in_hook"] + h["cpu"] - h["thread"]) / p["cpu"] + 1 for p, h in zip(plain, hook, strict=True)]
    return {
        "plain_cpu_ms": 1000 * float(np.median([p["cpu"] for p in plain])),
        "hook_cpu_ms": 1000 * float(np.median([h["cpu"] for h in hook])),
        "cpu": median_ci([h["cpu"] / p["cpu"] for p, h in zip(plain, hook, strict=True)]),
        "wall": median_ci([h["wall"] / p["wall"] for p, h in zip(plain, hook, strict=True)]),
        "in_hook": median_ci(in_hook),
        "sbs_cpu": median_ci([(r["sbs"]["hook_cpu"] + r["sbs"]["other_cpu"]) / r["sbs"]["plain_cpu"] for r in runs]),
        "sbs_wall": median_ci([r["sbs"]["hook_wall"] / r["sbs"]["plain_wall"] for r in runs]),
    }


def fmt(est: tuple[float, float, float]) -> str:
    return f"{est[0]:+.1f} % ({est[1]:+.1f}..{est[2]:+.1f})"


def parse_plan(text: str, boost_rounds: int) -> list[dict[str, Any]]:
    plan = []
    for item in filter(None, text.split(",")):
        config, _, rows = item.partition("@")
        if config not in ("defaults", "all10") or not rows.isdigit():
            sys.exit(f"bad plan row {item!r}: CONFIG@ROWS with CONFIG defaults or all10")
        plan.append({"config": config, "rows": int(rows), "rounds": boost_rounds})
    return plan


def verdicts(key: str, m: dict[str, Any], s: dict[str, Any], floor: dict[str, Any] | None = None) -> str:
    """The verdict reads the rounds estimate (CPU, every thread); the others are printed beside it."""
    below = m["sbs_cpu"][0] < s["sbs_cpu"][0] and m["in_hook"][0] < s["in_hook"][0]
    text = (f"{key}: rounds cpu murphy {fmt(m['sbs_cpu'])} vs smdebug {fmt(s['sbs_cpu'])}; runs cpu murphy "
            f"{m['cpu'][0]:+.1f} % vs smdebug {s['cpu'][0]:+.1f} %; in-hook murphy {m['in_hook'][0]:.1f} % vs smdebug "
            f"{s['in_hook'][0]:.1f} %; {'below' if below else 'NOT below'} smdebug")
    if key.startswith("defaults@"):
        est = m["sbs_cpu"]
        met = est[0] <= DEFAULTS_TARGET
        ci = "interval within it" if est[2] <= DEFAULTS_TARGET else f"interval up to {est[2]:+.1f} %"
        text += f"; target <= {DEFAULTS_TARGET:g} % (rounds cpu median): {'met' if met else 'MISSED'} ({ci})"
        if floor is not None:
            f = floor["sbs_cpu"]
            text += (f"; the format's file-system floor (raw) {fmt(f)}: murphy is {est[0] - f[0]:+.1f} points "
                     f"above it, and the target leaves {DEFAULTS_TARGET - f[0]:+.1f} points above the floor")
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=12, help="interleaved rounds (one plain + one hooked run each)")
    ap.add_argument("--boost-rounds", type=int, default=100, help="xgboost boosting rounds per run")
    ap.add_argument("--plan", default="defaults@5000,defaults@20000,all10@5000")
    ap.add_argument("--json", type=Path, help="also write the raw per-run figures here")
    ap.add_argument("--dir", default=None, help="where the hooks write (default: the system temp dir); "
                    "the header prints what its file-system calls cost")
    args = ap.parse_args()
    plan = parse_plan(args.plan, args.boost_rounds)
    pythons = {"murphy": sys.executable, "smdebug": venv_python("smdebug_xgboost_venv.sh"), "raw": sys.executable}
    # The raw floor is the default collections' files: it runs the defaults rows only.
    plans = {impl: [p for p in plan if impl != "raw" or p["config"] == "defaults"] for impl in IMPLS}
    t0, load0 = time.monotonic(), load_average()
    raw: dict[str, dict[str, list[Any]]] = {impl: {} for impl in IMPLS}
    where = args.dir or tempfile.gettempdir()
    fs = fs_cost(where)
    with tempfile.TemporaryDirectory(prefix="murphy-xgb-bench-", dir=where) as tmp:
        workers = {impl: Worker(impl, pythons[impl], tmp, plans[impl]) for impl in IMPLS if plans[impl]}
        try:
            for i in range(args.rounds):
                for impl in list(workers) if i % 2 == 0 else list(workers)[::-1]:
                    for key, pair in workers[impl].round(i).items():
                        raw[impl].setdefault(key, []).append(pair)
        finally:
            for w in workers.values():
                w.close()
    keys = [f"{p['config']}@{p['rows']}" for p in plan]
    est = {impl: {k: estimates(raw[impl][k]) for k in keys if k in raw[impl]} for impl in IMPLS}
    rows = []
    for key in keys:
        for impl in IMPLS:
            if key not in est[impl]:
                continue
            e = est[impl][key]
            rows.append([key, "raw floor" if impl == "raw" else impl, f"{e['plain_cpu_ms']:.0f}", f"{e['hook_cpu_ms']:.0f}", fmt(e["sbs_cpu"]),
                         fmt(e["sbs_wall"]), fmt(e["cpu"]), fmt(e["wall"]), fmt(e["in_hook"])])
    print(f"XGBoost hook overhead — {machine()}, xgboost {workers['murphy'].ready['xgboost']}, {args.boost_rounds} "
          f"boosting rounds of ROWSx20, depth 6, one thread; {args.rounds} interleaved rounds; "
          f"{time.strftime('%Y-%m-%d %H:%M')}, {time.monotonic() - t0:.0f} s; {load0} at the start, "
          f"{load_average()} at the end; {fs}\n")
    print(table(["config@rows", "hook", "plain cpu ms", "hooked cpu ms", "rounds: cpu ovh (90% CI)",
                 "rounds: wall ovh", "runs: cpu ovh", "runs: wall ovh", "in-hook"], rows))
    print("\n" + "\n".join(verdicts(k, est["murphy"][k], est["smdebug"][k], est["raw"].get(k)) for k in keys))
    if args.json:
        args.json.write_text(json.dumps({"plan": plan, "runs": raw, "estimates": est}, indent=1))


if __name__ == "__main__":
    main()
