"""Rule evaluation throughput, murphy vs the real smdebug 1.0.34, over one finished trial.

The trial (5,000 steps by default, 1 worker, TRAIN mode; 4 weights + 4 gradients of 8x8 float32,
each gradient also with its stored abs_mean reduction: benchmarks/_rules_data.py) is written once
with murphy's writer. Each rule runs in a fresh process over every step:
- murphy: the built-in ExplodingTensor / VanishingGradient through ``murphy.rules.evaluate_rule``
  (what ``murphy rule-eval`` runs), default parameters;
- smdebug: equivalent custom rules written for smdebug's Rule API (``np.isfinite`` over every
  tensor at the step; ``reduction_value(step, "mean", abs=True) < 1e-7`` over the gradients)
  through smdebug's ``invoke_rule(rule, start_step=0, end_step=N)``.
steps/s = steps / (create_trial + evaluation); interpreter start-up and imports are excluded.

With ``--s3`` it then polls a live trial on SeaweedFS as a rule container does and prints the
requests each poll makes as the trial grows (benchmarks/_s3_polls.py): they must depend on the
new steps only, never on the steps already there.

usage: python benchmarks/rule_throughput.py [--steps 5000] [--json out.json] [--profile DIR] [--s3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import REPO, machine, run_json, smdebug_python, table  # noqa: E402
from _rules_data import write_collections_file, write_step  # noqa: E402

WORKER = str(HERE / "_rules_worker.py")
RULES = {"exploding": "ExplodingTensor", "vanishing": "VanishingGradient"}


def write_trial(root: Path, steps: int) -> None:
    from murphy.storage import LocalObjectStore
    from murphy.tensorio.writer import write_end_of_training

    store = LocalObjectStore(str(root))
    write_collections_file(store)
    rng = np.random.default_rng(0)
    for step in range(steps):
        write_step(store, step, rng)
    write_end_of_training(store)


def run_one(py: str, impl: str, rule: str, path: Path, steps: int, env: dict[str, str],
            profile: Path | None) -> dict[str, Any]:
    cmd = [py, WORKER, "--impl", impl, "--mode", "throughput", "--rule", rule,
           "--end-step", str(steps), str(path)]
    if profile is not None:
        cmd += ["--profile", str(profile / f"{impl}-{rule}.prof")]
    r = run_json(cmd, env=env)
    if r["status"] != "NoIssuesFound":
        sys.exit(f"{impl} {rule}: expected NoIssuesFound on a healthy trial, got {r}")
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--profile", type=Path, help="write one cProfile file per run into this folder")
    ap.add_argument("--s3", action="store_true", help="also count the S3 requests per poll of a live trial")
    ap.add_argument("--s3-only", action="store_true", help="only the S3 requests-per-poll table")
    args = ap.parse_args()
    if args.s3 or args.s3_only:
        import _s3_polls

        poll_rows = _s3_polls.measure(REPO)
        if args.s3_only:
            print(f"S3 requests per rule poll — {machine()}, {time.strftime('%Y-%m-%d')}")
            print(_s3_polls.report(poll_rows, table))
            return
    sm_py = smdebug_python()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="murphy-rule-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MURPHY_S3"))}
    env["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"  # the trial is finished; don't sleep 1 s
    results: list[dict[str, Any]] = []
    try:
        t0 = time.monotonic()
        write_trial(tmp / "trial", args.steps)
        print(f"wrote {args.steps} steps in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        for rule in RULES:
            m = run_one(sys.executable, "murphy", rule, tmp / "trial", args.steps, env, args.profile)
            s = run_one(sm_py, "smdebug", rule, tmp / "trial", args.steps, env, args.profile)
            results.append({"rule": rule, "murphy": m, "smdebug": s})
            print(f"{rule}: murphy {m}\n{rule}: smdebug {s}", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(results, args)
    if args.s3:
        print("\nS3 requests per rule poll (a live trial on SeaweedFS, counted at a loopback proxy)")
        print(_s3_polls.report(poll_rows, table))


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    rows = []
    worst = float("inf")
    for r in results:
        m, s = r["murphy"], r["smdebug"]
        m_t, s_t = m["open_s"] + m["eval_s"], s["open_s"] + s["eval_s"]
        m_rate, s_rate = args.steps / m_t, args.steps / s_t
        worst = min(worst, m_rate / s_rate)
        rows.append([RULES[r["rule"]], f"{m['open_s']:.2f}", f"{m['eval_s']:.2f}", f"{m_rate:,.0f}",
                     f"{s['open_s']:.2f}", f"{s['eval_s']:.2f}", f"{s_rate:,.0f}", f"{m_rate / s_rate:.1f}x"])
    print(f"rule throughput — {machine()}, {args.steps} steps x 8 tensors (+4 abs_mean), local, "
          f"{time.strftime('%Y-%m-%d')}")
    print(table(["rule", "murphy open s", "murphy eval s", "murphy steps/s", "smdebug open s",
                 "smdebug eval s", "smdebug steps/s", "murphy/smdebug"], rows))
    print(f"murphy faster than smdebug on every rule: worst ratio {worst:.1f}x → "
          f"{'OK' if worst >= 1 else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
