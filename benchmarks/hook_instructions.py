"""Hook overhead in CPU instructions, not seconds: a low-noise check of hook_overhead.py's rows.

Wall-clock overhead on a shared 2-core VM moves by more than the 2 % target from run to run;
valgrind's callgrind counts instructions (every thread's, the background writer's included),
which repeat for the same inputs whatever else the machine does. Each configuration is run at two
step counts and the difference is taken, so interpreter start, imports, hook construction and
close cancel out and what remains is the per-step cost at the row's save cadence.

Instructions are not time (cache misses, the GIL), so this complements the wall-clock figures; it
does not replace them. Needs valgrind. Slow: each run takes minutes under callgrind.

usage: python benchmarks/hook_instructions.py [--row losses+reductions/100] [--steps 50 250]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import machine, table  # noqa: E402

RUN = """
import sys
sys.path.insert(0, {here!r})
import torch
torch.set_num_threads(1)
import _hook_bench_worker as w
w.WARMUP = 2
impl = None if sys.argv[1] == "none" else sys.argv[1]
w.train(int(sys.argv[2]), impl, sys.argv[3] if impl else None)
"""


def instructions(script: Path, impl: str, steps: int, row: str, out: Path) -> int:
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/{impl}.{steps}.cg",
         sys.executable, str(script), impl, str(steps), row],
        capture_output=True, text=True, check=True)
    m = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if m is None:
        raise SystemExit(f"no instruction count from callgrind:\n{proc.stderr[-2000:]}")
    return int(m.group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--row", default="losses+reductions/100")
    ap.add_argument("--steps", type=int, nargs=2, default=[50, 250])
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    low, high = args.steps
    out = Path(tempfile.mkdtemp(prefix="murphy-hook-instr-"))
    script = out / "run.py"
    script.write_text(RUN.format(here=str(HERE)))
    configs = [(impl, steps) for impl in ("none", "murphy") for steps in (low, high)]
    with ThreadPoolExecutor(args.jobs) as pool:
        counts = dict(zip(configs, pool.map(lambda c: instructions(script, c[0], c[1], args.row, out), configs), strict=True))
    per_step = {impl: (counts[(impl, high)] - counts[(impl, low)]) / (high - low) for impl in ("none", "murphy")}
    overhead = per_step["murphy"] / per_step["none"] - 1
    print(f"hook_instructions — {machine()}, row {args.row}, steps {low} and {high} (difference taken)")
    print(table(["run", f"instr @ {low}", f"instr @ {high}", "instr/step", "overhead"], [
        ["no hook", f"{counts[('none', low)]:,}", f"{counts[('none', high)]:,}", f"{per_step['none']:,.0f}", ""],
        ["murphy", f"{counts[('murphy', low)]:,}", f"{counts[('murphy', high)]:,}", f"{per_step['murphy']:,.0f}",
         f"{overhead * 100:+.2f}%"],
    ]))


if __name__ == "__main__":
    main()
