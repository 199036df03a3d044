"""The training process of benchmarks/detection_latency.py.

Writes one step every ``--interval`` seconds with murphy's StepWriter into ``store`` (a path or
s3:// URI). Steps before ``--bad-step`` are finite. Before the bad step it waits for
``--go-file`` (the benchmark creates it once the rule process has evaluated every earlier step
and is polling for the next one), then sleeps a random 0..``--jitter`` s so the bad step lands at
a random phase of the rule's polling cycle. Every step from the bad one on has non-finite
gradients. It stops at ``--stop-file`` (or ``--max-steps``), writes the end-of-training marker and
prints one JSON line: ``visible`` = wall-clock time right after the bad step's index file was put.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rules_data import write_collections_file, write_step


def _wait_for(path: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--bad-step", type=int, default=10)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--go-file", required=True)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--jitter", type=float, default=0.0)
    ap.add_argument("--max-steps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from murphy.storage import open_store
    from murphy.tensorio.writer import write_end_of_training

    store = open_store(args.store)
    rng = np.random.default_rng(args.seed)
    jitter = random.Random(args.seed)
    write_collections_file(store)
    visible: float | None = None
    step = 0
    while step < args.max_steps and not os.path.exists(args.stop_file):
        if step == args.bad_step:
            if not _wait_for(args.go_file, 120):
                sys.exit("the rule process never became ready")
            time.sleep(jitter.uniform(0, args.jitter))
        write_step(store, step, rng, bad=step >= args.bad_step)
        if step == args.bad_step:
            visible = time.time()
        step += 1
        time.sleep(args.interval)
    write_end_of_training(store)
    print(json.dumps({"visible": visible, "steps": step}), flush=True)


if __name__ == "__main__":
    main()
