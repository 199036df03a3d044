"""Every-step saving: how fast murphy's hook writes, vs smdebug 1.0.34 and the raw-write floor.

The same CNN (benchmarks/_writer_bench_worker.py) saves every step, pinned to ONE core and then to
two: its weights+biases+gradients (``wg``, ~2.5 MB/step) and, in the ``wgo`` rows, also its layer
outputs (~4.7 MB/step). Three writers:

* murphy's PyTorch hook (murphy's venv), with its deferred snapshot copies (``murphy``; on two
  cores its steps are encoded and written by a writer process, murphy.hook.writer_process, whose
  CPU is counted with the block's), with the writer thread instead (``murphyW``:
  ``MURPHY_HOOK_WRITER_PROCESS=0``) and with every copy on the training thread (``murphyT``:
  ``MURPHY_HOOK_DEFERRED_COPY=0``, which also keeps the thread) and, on two cores, with a copier
  thread beside the writer process (``murphyC``: ``MURPHY_HOOK_COPIER=1``; by default the fences
  copy there, murphy.hook.torch_util.copier_wanted);
* smdebug 1.0.34's PyTorch hook (its own venv). Its "outputs" collection saves nothing on torch
  2.x, so both libraries select the layer outputs by name (``include_regex``) and write the same
  tensors and bytes (the driver checks the MB per step and flags unequal work);
* ``raw``: the bytes murphy's hook wrote for a step, written with one ``write`` per file into the
  same layout on the training thread (the floor: no encoding, no copy, no rename).

Each interpreter alternates blocks of steps with no hook and with each variant; "added" is a
variant block's process CPU time (``getrusage``: every thread, user + system) minus the no-hook
block next to it, per step, median over rounds. CPU time, not wall time, because the machine is
shared. Columns: MB written per step; added CPU ms per step; CPU ms per saved MB; MB per added CPU
second; the training thread's added time per step (wall, the step loop only) and CPU; context
switches per step. Then where murphy's writer time goes (one instrumented run, thread CPU per stage).

Targets (issue 20): on one core murphy's CPU per saved MB <= 2x the raw floor's and < 0.6x
smdebug's on the same tensors; on two cores the training thread's added time per step <= 10 % of
murphy's one-core added CPU per step.

usage: python benchmarks/writer_throughput.py [--steps 20] [--rounds 5] [--dir /tmp] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

from _common import machine, run_json, smdebug_python, table

WORKER = str(Path(__file__).resolve().parent / "_writer_bench_worker.py")
MURPHY_VARIANTS = "murphy-wg,murphy-wgo,murphyW-wg,murphyW-wgo,murphyT-wg,murphyT-wgo,raw-wg,raw-wgo"
SMDEBUG_VARIANTS = "smdebug-wg,smdebug-wgo"
# On two cores only (on one core no copies are deferred): the copier thread forced on.
TWO_CORE_VARIANTS = ",murphyC-wg,murphyC-wgo"


def _murphy_variants(cores: int) -> str:
    return MURPHY_VARIANTS + (TWO_CORE_VARIANTS if cores == 2 else "")


def _per_round(doc: dict[str, Any], variant: str) -> dict[str, np.ndarray]:
    steps = doc["steps"]
    plain, blocks = doc["blocks"]["plain"], doc["blocks"][variant]
    def arr(key: str, base: bool = True) -> np.ndarray:
        v = np.array([b[key] for b in blocks])
        return (v - np.array([b[key] for b in plain])) / steps if base else v / steps
    return {
        "mb": arr("bytes", base=False) / 1e6, "cpu": arr("cpu_ms"), "train_wall": arr("train_wall_ms"),
        "train_cpu": arr("train_cpu_ms"), "switches": arr("switches"),
        "direct": np.array([b["direct_cpu_ms"] for b in blocks]) / steps,
    }


def summarise(doc: dict[str, Any], variant: str) -> dict[str, float]:
    r = _per_round(doc, variant)
    med = {k: float(np.median(v)) for k, v in r.items()}
    direct_per_mb = r["direct"] / np.maximum(r["mb"], 1e-9)
    med["direct_per_mb"] = float(np.median(direct_per_mb))
    cpu_per_mb = r["cpu"] / np.maximum(r["mb"], 1e-9)
    med["cpu_per_mb"] = float(np.median(cpu_per_mb))
    med["cpu_per_mb_lo"], med["cpu_per_mb_hi"] = float(cpu_per_mb.min()), float(cpu_per_mb.max())
    return med


def _row(name: str, cores: int, s: dict[str, float]) -> list[str]:
    mbps = s["mb"] / (s["cpu"] / 1e3) if s["cpu"] > 0 else float("inf")
    return [name, str(cores), f"{s['mb']:.2f}", f"{s['cpu']:.2f}",
            f"{s['cpu_per_mb']:.2f} ({s['cpu_per_mb_lo']:.2f}..{s['cpu_per_mb_hi']:.2f})",
            f"{s['direct']:.2f}", f"{s['direct_per_mb']:.2f}", f"{mbps:.0f}",
            f"{s['train_wall']:.2f}", f"{s['train_cpu']:.2f}", f"{s['switches']:.1f}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20, help="steps per block")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where the runs write (default: the system temp dir)")
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.dir:
        env["TMPDIR"] = args.dir
    common = ["--steps", str(args.steps), "--rounds", str(args.rounds)]
    t0 = time.monotonic()
    load0 = os.getloadavg()
    smd_py = smdebug_python()
    docs: dict[tuple[str, int], dict[str, Any]] = {}
    for cores in (1, 2):
        extra = ["--phases"] if cores == 1 else []
        docs[("murphy", cores)] = run_json([sys.executable, WORKER, "--variants", _murphy_variants(cores),
                                            "--cores", str(cores), *common, *extra], env=env)
        docs[("smdebug", cores)] = run_json([smd_py, WORKER, "--variants", SMDEBUG_VARIANTS,
                                             "--cores", str(cores), *common], env=env)
    load1 = os.getloadavg()
    s: dict[tuple[str, int], dict[str, float]] = {}
    rows = []
    for cores in (1, 2):
        for impl, variants in (("murphy", _murphy_variants(cores)), ("smdebug", SMDEBUG_VARIANTS)):
            for v in variants.split(","):
                s[(v, cores)] = summarise(docs[(impl, cores)], v)
                rows.append(_row(v, cores, s[(v, cores)]))
    where = args.dir or os.environ.get("TMPDIR") or "/tmp"
    print(f"writer throughput — {machine()}, torch {docs[('murphy', 1)]['torch']} (1 thread), "
          f"{args.steps} steps x {args.rounds} rounds per variant, files under {where}, "
          f"load average {load0[0]:.2f} → {load1[0]:.2f}, {time.strftime('%Y-%m-%d')}, {time.monotonic() - t0:.0f} s")
    print(table(["variant", "cores", "MB/step", "added CPU ms/step", "CPU ms per MB (min..max)",
                 "own CPU ms/step", "own CPU ms per MB", "MB per added CPU s", "train thread +ms/step (wall)", "train thread +CPU ms/step",
                 "+ctx switches/step"], rows))
    for cores in (1, 2):
        for t in ("wg", "wgo"):
            m_mb, s_mb = s[(f"murphy-{t}", cores)]["mb"], s[(f"smdebug-{t}", cores)]["mb"]
            if abs(m_mb - s_mb) > 0.05 * max(m_mb, s_mb):
                print(f"{t}, {cores} core(s): UNEQUAL WORK — murphy wrote {m_mb:.2f} MB/step, smdebug {s_mb:.2f}")
    for cores in (1, 2):
        for v in _murphy_variants(cores).split(","):
            dropped = max(b.get("dropped", 0.0) for b in docs[("murphy", cores)]["blocks"][v])
            if dropped:
                print(f"{v}, {cores} core(s): {dropped:.0f} steps dropped by back-pressure (MB/step counts what was written)")
    print("added = the block's process CPU minus the no-hook block's; own = the variant's callbacks (or raw "
          "writes) on the training thread + every other thread's CPU, measured directly (less noisy under load; "
          "misses indirect costs such as torch's slower path for modules with forward hooks).")
    verdicts = []
    for key, what in (("cpu_per_mb", "added"), ("direct_per_mb", "own")):
        for t in ("wg", "wgo"):
            m, raw = s[(f"murphy-{t}", 1)], s[(f"raw-{t}", 1)]
            r = m[key] / raw[key] if raw[key] > 0 else float("inf")
            verdicts.append(f"{t}, 1 core ({what}): murphy {m[key]:.2f} CPU ms/MB = {r:.2f}x the raw floor "
                            f"({raw[key]:.2f}); target <= 2x → {'OK' if r <= 2 else 'MISSED'}")
        for t in ("wg", "wgo"):
            m, smd = s[(f"murphy-{t}", 1)], s[(f"smdebug-{t}", 1)]
            r = m[key] / smd[key]
            verdicts.append(f"{t}, 1 core ({what}): murphy {m[key]:.2f} CPU ms/MB = {r:.2f}x smdebug's "
                            f"({smd[key]:.2f}), same tensors; target < 0.6x → {'OK' if r < 0.6 else 'MISSED'}")
    for t in ("wg", "wgo"):
        one, two = s[(f"murphy-{t}", 1)], s[(f"murphy-{t}", 2)]
        share = two["train_wall"] / one["cpu"] if one["cpu"] > 0 else float("inf")
        verdicts.append(f"{t}, 2 cores: murphy's training thread +{two['train_wall']:.2f} ms/step (wall; "
                        f"+{two['train_cpu']:.2f} ms CPU) = {100 * share:.0f} % of its one-core added "
                        f"{one['cpu']:.2f} ms/step; target <= 10 % → {'OK' if share <= 0.10 else 'MISSED'}")
    for cores in (1, 2):
        for t in ("wg", "wgo"):
            d, o = s[(f"murphy-{t}", cores)], s[(f"murphyT-{t}", cores)]
            verdicts.append(f"{t}, {cores} core(s), deferred copies vs on the training thread (murphyT): training "
                            f"thread +{d['train_cpu']:.2f} vs +{o['train_cpu']:.2f} CPU ms/step, +{d['train_wall']:.2f} "
                            f"vs +{o['train_wall']:.2f} ms/step wall; process +{d['cpu']:.2f} vs +{o['cpu']:.2f} CPU ms/step")
    for t in ("wg", "wgo"):
        d, w = s[(f"murphy-{t}", 2)], s[(f"murphyW-{t}", 2)]
        verdicts.append(f"{t}, 2 cores, writer process vs writer thread (murphyW): training thread "
                        f"+{d['train_wall']:.2f} vs +{w['train_wall']:.2f} ms/step wall, +{d['train_cpu']:.2f} vs "
                        f"+{w['train_cpu']:.2f} CPU ms/step; all processes +{d['cpu']:.2f} vs +{w['cpu']:.2f} CPU ms/step")
    for t in ("wg", "wgo"):
        d, c = s[(f"murphy-{t}", 2)], s[(f"murphyC-{t}", 2)]
        verdicts.append(f"{t}, 2 cores, the fences' copies vs a copier thread beside the writer process (murphyC): "
                        f"training thread +{d['train_wall']:.2f} vs +{c['train_wall']:.2f} ms/step wall, "
                        f"+{d['train_cpu']:.2f} vs +{c['train_cpu']:.2f} CPU ms/step; all processes +{d['cpu']:.2f} "
                        f"vs +{c['cpu']:.2f} CPU ms/step")
    print("\n".join(verdicts))
    ph = docs[("murphy", 1)].get("phases")
    if ph:
        print(f"\nwhere murphy's time goes (wgo, 1 core, one instrumented run of {ph['steps']} steps, "
              f"{ph['mb_per_step']:.2f} MB/step; thread CPU ms per step):")
        prow = [[k, f"{v:.3f}", f"{ph['calls_per_step'].get(k, 0):.1f}"] for k, v in ph["phase_ms_per_step"].items()]
        writer = ph["writer_thread_cpu_ms_per_step"]
        accounted = sum(v for k, v in ph["phase_ms_per_step"].items() if "(writer)" in k)
        if writer is not None:
            prow.append(["writer thread, rest (queue, loop, StepWriter glue, GIL hand-offs)",
                         f"{writer - accounted:.3f}", "-"])
            prow.append(["writer thread total", f"{writer:.3f}", "-"])
        prow.append(["training thread total (step + hook callbacks)", f"{ph['train_thread_cpu_ms_per_step']:.3f}", "-"])
        prow.append(["process total", f"{ph['process_cpu_ms_per_step']:.3f}", "-"])
        print(table(["stage", "CPU ms/step", "calls/step"], prow))
    if args.json:
        args.json.write_text(json.dumps({f"{k[0]}-{k[1]}": v for k, v in docs.items()}, indent=1))


if __name__ == "__main__":
    main()
