"""Rule quality on real training runs: generate the labelled suite, run every rule over every run,
print per-rule recall, false-alarm rate and detection latency, and a verdict against the targets
(recall >= 90 %, false alarms <= 5 %).

usage: python benchmarks/rule_quality/run.py [--quick] [--seeds N] [--out DIR] [--only FAULT,...]
       [--markdown FILE] [--workers 2]

Each fault type has ``--seeds`` faulty runs and as many healthy twins (default 3: 11 x 3 x 2 =
66 runs; ``--quick``: 1 seed). Runs go to a temporary directory unless ``--out`` is given.
``--workers 2``: the rules judge 2-worker trials composed from those runs instead (a fault on
``worker_1`` only, and two healthy workers; see ``rule_quality/workers.py``).
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
from rule_quality.workers import attribute, check_against_alone, merge_workers  # noqa: E402


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


def generate_and_evaluate_pairs(out: Path, seeds: int, only: set[str] | None) -> tuple[list[RunResult], list[str]]:
    """The 2-worker variant: faulty pairs (healthy worker_0, faulty worker_1) and healthy pairs."""
    results: list[RunResult] = []
    wrong: list[str] = []
    for fault in FAULTS:
        if only and fault.name not in only:
            continue
        runs = {}
        for seed in range(seeds):
            for faulty in (True, False):
                run_dir = out / f"{fault.name}-{'fault' if faulty else 'healthy'}-seed{seed}"
                runs[(seed, faulty)] = (run_dir, fault.run(faulty, 1000 + seed, str(run_dir)))
        for seed in range(seeds):
            for faulty in (True, False):
                other_dir, log = runs[(seed, True)] if faulty else runs[((seed + 1) % seeds, False)]
                pair = out / f"2w-{fault.name}-{'fault' if faulty else 'healthy'}-seed{seed}"
                merge_workers(pair, [runs[(seed, False)][0], other_dir])
                t1 = time.perf_counter()
                verdicts, bad = attribute(evaluate_run(str(pair)), faulty)
                wrong += [f"{pair.name} {w}" for w in bad]
                res = RunResult(fault.name, faulty, seed, fault.onset(log) if faulty else None,
                                log.global_steps, verdicts, None if faulty else worst_quarter_change(log))
                fired = ", ".join(f"{v.rule}@{v.step}" for v in res.verdicts if v.fired) or "-"
                print(f"  {pair.name:43} rules {time.perf_counter() - t1:4.1f}s onset {res.onset} "
                      f"fired: {fired}{' WRONG WORKER: ' + str(len(bad)) if bad else ''}", flush=True)
                results.append(res)
    return results, wrong


def render(results: list[RunResult], faults: list[str], elapsed: float, seeds: int,
           wrong: list[str] | None = None) -> str:
    targets = {f.name: f.rules for f in FAULTS}
    scores = score(results, targets)
    what = "2-worker trials" if wrong is not None else "runs"
    lines = [
        f"rule quality — {machine()}, {len(results)} {what} ({len(faults)} fault types x {seeds} "
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
    if wrong is not None:
        lines += ["", "2-worker trials: a faulty pair is (healthy twin as worker_0, faulty run as worker_1); a "
                  "finding counts only when it names worker_1. Findings naming the healthy worker_0 on a faulty "
                  f"pair (any rule): {len(wrong)}"]
        lines += [f"  {w}" for w in wrong]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one seed per fault type")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, help="keep the runs here (default: a temporary dir)")
    ap.add_argument("--only", help="comma list of fault types")
    ap.add_argument("--markdown", type=Path, help="also write the report to this file")
    ap.add_argument("--workers", type=int, choices=(1, 2), default=1,
                    help="2: judge 2-worker trials composed from the runs (rule_quality/workers.py)")
    ap.add_argument("--check-alone", action="store_true",
                    help="with --workers 2: also judge every run alone and check that each pair's finding "
                         "is the earlier of its two runs' own, on that worker")
    args = ap.parse_args()
    seeds = 1 if args.quick else args.seeds
    only = set(args.only.split(",")) if args.only else None
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    logging.getLogger("murphy").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="murphy-rule-quality-") as tmp:
        out = args.out or Path(tmp)
        wrong: list[str] | None = None
        consistency = ""
        if args.workers == 2:
            results, wrong = generate_and_evaluate_pairs(out, seeds, only)
            if args.check_alone:
                agree, diffs = check_against_alone(out)
                consistency = "\n".join([f"pairs' findings equal to the earlier of their runs' own findings, "
                                          f"on that worker: {agree}/{agree + len(diffs)} rule-pairs", *diffs])
        else:
            results = generate_and_evaluate(out, seeds, only)
    faults = [f.name for f in FAULTS if not only or f.name in only]
    report = render(results, faults, time.perf_counter() - t0, seeds, wrong)
    if consistency:
        report += "\n" + consistency
    print("\n" + report)
    if args.markdown:
        args.markdown.write_text("```\n" + report + "\n```\n")


if __name__ == "__main__":
    main()
