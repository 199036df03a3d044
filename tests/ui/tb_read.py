"""Reads a TensorBoard logdir with TensorBoard's own EventAccumulator (run by the browser venv's
python, which has the ``tensorboard`` package) and prints it as JSON: ``{run: {"scalars": {tag:
[[step, value]]}, "histograms": {tag: [[step, num, min, max, sum(bucket)]]}}}``; NaN as "NaN"."""

from __future__ import annotations

import json
import math
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def num(v: float) -> float | str:
    return v if math.isfinite(v) else ("NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity"))


def main() -> None:
    logdir = sys.argv[1]
    out = {}
    for run in sorted(os.listdir(logdir)):
        path = os.path.join(logdir, run)
        if not os.path.isdir(path):
            continue
        ea = EventAccumulator(path, size_guidance={"scalars": 0, "histograms": 0})
        ea.Reload()
        out[run] = {
            "scalars": {t: [[e.step, num(e.value)] for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]},
            "histograms": {t: [[e.step, e.histogram_value.num, e.histogram_value.min, e.histogram_value.max,
                                sum(e.histogram_value.bucket)] for e in ea.Histograms(t)]
                           for t in ea.Tags()["histograms"]},
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
