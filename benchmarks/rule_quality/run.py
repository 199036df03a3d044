"""Rule quality on real training runs: generate the labelled suite, run every rule over every run,
print per-rule recall, false-alarm rate and detection latency, and a verdict against the targets
(recall >= 90 %, false alarms <= 5 %).

usage: python benchmarks/rule_quality/run.py [--quick] [--seeds N] [--out DIR] [--only FAULT,...]
       [--markdown FILE]

Each fault type has ``--seeds`` faulty runs and as many healthy twins (default 3: 11 x 3 x 2 =
66 runs; ``--quick``: 1 seed). Runs go to a temporary directory unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import torch  # noqa: E402

from _common import machine, table  # noqa: E402
from rule_quality.evaluate import RULES, evaluate_run  # noqa: E402
from rule_quality.harness import worst_quarter_change  # noqa: E402
from rule_quality.report import (  # noqa: E402
    RULE_HEADERS,
    RunResult,
    matrix_rows,
    overrides_text,
    progress_line,
    rule_rows,
    score,
    short,
    verdict_line,
)
from rule_quality.scenarios import FAULTS  # noqa: E402


def generate_and_evaluate(out: Path, seeds: int, only: set[str] | None) -> list[RunResult]:
    results = []
    for fault in FAULTS:
        if only and fault.name not in only:
            continue
        for seed in range(seeds):
            for faulty in (True, False):
                run_dir = out / f"{fault.name}-{'fault' if faulty else 'healthy'}-seed{seed}"
                t0 = time.perf_counter()
                log = fault.run(faulty, 1000 + seed, str(run_dir))
                t1 = time.perf_counter()
                res = RunResult(fault.name, faulty, seed, fault.onset(log) if faulty else None,
                                log.global_steps, evaluate_run(str(run_dir)),
                                None if faulty else worst_quarter_change(log))
                fired = ", ".join(f"{v.rule}@{v.step}" for v in res.verdicts if v.fired) or "-"
                trend = "" if res.progress is None else f" loss/quarter {100 * res.progress:+.0f}%"
                print(f"  {run_dir.name:40} train {t1 - t0:4.1f}s rules {time.perf_counter() - t1:4.1f}s "
                      f"onset {res.onset}{trend} fired: {fired}", flush=True)
                results.append(res)
    return results


def render(results: list[RunResult], faults: list[str], elapsed: float, seeds: int) -> str:
    targets = {f.name: f.rules for f in FAULTS}
    scores = score(results, targets)
    lines = [
        f"rule quality — {machine()}, {len(results)} runs ({len(faults)} fault types x {seeds} "
        f"seed(s) x faulty/healthy), {elapsed:.0f} s",
        f"parameters: {overrides_text()}",
        "",
        table(RULE_HEADERS, rule_rows(scores)),
        "",
        verdict_line(scores),
        progress_line(results),
        "",
        "runs each rule fired on (rows: fault type; '.' none, n/a: the run saved nothing the rule reads):",
        table(["runs", *(short(r) for r in RULES)], matrix_rows(results, faults)),
        "",
        "fault types: " + "; ".join(f"{f.name} = {f.what} -> {', '.join(f.rules)}"
                                    for f in FAULTS if f.name in faults),
    ]
    alarms = [(s.rule, s.alarm_runs) for s in scores if s.alarm_runs]
    misses = [(s.rule, s.missed_runs) for s in scores if s.missed_runs]
    if alarms:
        lines += ["", "false alarms (run@step):"]
        lines += [f"  {r}: {', '.join(runs)}" for r, runs in alarms]
    if misses:
        lines += ["", "missed faulty runs:"]
        lines += [f"  {r}: {', '.join(runs)}" for r, runs in misses]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one seed per fault type")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, help="keep the runs here (default: a temporary dir)")
    ap.add_argument("--only", help="comma list of fault types")
    ap.add_argument("--markdown", type=Path, help="also write the report to this file")
    args = ap.parse_args()
    seeds = 1 if args.quick else args.seeds
    only = set(args.only.split(",")) if args.only else None
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    logging.getLogger("murphy").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="murphy-rule-quality-") as tmp:
        out = args.out or Path(tmp)
        results = generate_and_evaluate(out, seeds, only)
    faults = [f.name for f in FAULTS if not only or f.name in only]
    report = render(results, faults, time.perf_counter() - t0, seeds)
    print("\n" + report)
    if args.markdown:
        args.markdown.write_text("```\n" + report + "\n```\n")


if __name__ == "__main__":
    main()
