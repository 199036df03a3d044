"""Trial reading, murphy vs the real smdebug 1.0.34, on the same 1,000-step x 50-tensor trial.

The trial (1 worker, TRAIN mode, float32 8x16 tensors) is written with murphy's writer
(murphy.tensorio.writer.StepWriter; the compat suite proves it byte-layout-identical to smdebug's
FileWriter). Each reader runs in a fresh process (smdebug in its own venv): time to open the trial
and list every step, and time to read every value. S3: SeaweedFS started by this script (or
--s3-endpoint); smdebug needs a one-line listing workaround there (see _trial_read_worker.py).

usage: python benchmarks/trial_read.py [--steps 1000] [--tensors 50] [--s3-value-steps 5] [--no-s3]
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

WORKER = str(HERE / "_trial_read_worker.py")


def write_trial(root: Path, steps: int, tensors: int) -> None:
    """A finished 1-worker trial: collections file, one step file pair per step, end marker."""
    from murphy.core import Collection, CollectionsDoc, ModeKeys
    from murphy.storage import LocalObjectStore
    from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training

    store = LocalObjectStore(str(root))
    names = [f"Net_layer{i}.weight" for i in range(tensors)]
    write_collections(store, CollectionsDoc({"weights": Collection("weights", include_regex=["weight"], tensor_names=names)}, 1))
    rng = np.random.default_rng(0)
    for step in range(steps):
        w = StepWriter(store, step, "worker_0", ModeKeys.TRAIN, step)
        for name in names:
            w.add(name, rng.standard_normal((8, 16), dtype=np.float32))
        w.close()
    write_end_of_training(store)


def upload(root: Path, server: Any, bucket: str, prefix: str) -> None:
    client = server.client()
    for p in root.rglob("*"):
        if p.is_file():
            client.put_object(Bucket=bucket, Key=f"{prefix}/{p.relative_to(root)}", Body=p.read_bytes())


def measure(label: str, path: str, env: dict[str, str], sm_py: str, value_steps: int, sm_extra: list[str]) -> dict[str, Any]:
    vs = ["--value-steps", str(value_steps)]
    m = run_json([sys.executable, WORKER, "--impl", "murphy", *vs, path], env=env)
    s = run_json([sm_py, WORKER, "--impl", "smdebug", *vs, *sm_extra, path], env=env)
    if m["steps"] != s["steps"] or m["values"] != s["values"] or not np.isclose(m["checksum"], s["checksum"], rtol=1e-9):
        sys.exit(f"{label}: readers disagree: murphy {m} vs smdebug {s}")
    return {"label": label, "murphy": m, "smdebug": s}


def _start_s3(endpoint: str | None) -> Any:
    sys.path.insert(0, str(REPO / "tests"))
    import servers

    if endpoint:
        return servers.S3Server("given", endpoint, os.environ.get("AWS_ACCESS_KEY_ID", ""), os.environ.get("AWS_SECRET_ACCESS_KEY", ""))
    return servers.start("seaweedfs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--tensors", type=int, default=50)
    ap.add_argument("--s3-value-steps", type=int, default=5, help="S3: read values of the first N steps (one GET each for smdebug)")
    ap.add_argument("--s3-endpoint", help="use this S3 endpoint (credentials from AWS_*) instead of starting SeaweedFS")
    ap.add_argument("--no-s3", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sm_py = smdebug_python()
    tmp = Path(tempfile.mkdtemp(prefix="murphy-trial-bench-"))
    results = []
    try:
        t0 = time.monotonic()
        write_trial(tmp / "trial", args.steps, args.tensors)
        print(f"wrote {args.steps} steps x {args.tensors} tensors in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MURPHY_S3"))}
        env["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"  # the trial is finished; don't sleep 1 s
        results.append(measure("local", str(tmp / "trial"), env, sm_py, 0, []))
        if not args.no_s3:
            server = _start_s3(args.s3_endpoint)
            try:
                import servers

                bucket = servers.new_bucket(server, prefix="bench")
                upload(tmp / "trial", server, bucket, "trial")
                s3env = {**env, **server.env()}
                results.append(measure(f"s3 ({server.name})", f"s3://{bucket}/trial", s3env, sm_py,
                                       args.s3_value_steps, ["--seaweedfs-workaround"]))
            finally:
                server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(results, args)


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    rows = []
    for r in results:
        m, s = r["murphy"], r["smdebug"]
        rows.append([r["label"], "open + list steps", f"{m['steps']} steps", f"{m['list_s']:.3f}", f"{s['list_s']:.3f}", f"{s['list_s'] / m['list_s']:.1f}x"])
        rows.append([r["label"], "read every value", f"{m['values']} values", f"{m['values_s']:.3f}", f"{s['values_s']:.3f}", f"{s['values_s'] / m['values_s']:.1f}x"])
    print(f"trial read — {machine()}, {args.steps} steps x {args.tensors} tensors, {time.strftime('%Y-%m-%d')}")
    print(table(["store", "operation", "size", "murphy s", "smdebug s", "speed-up"], rows))
    worst = min(min(r["smdebug"]["list_s"] / r["murphy"]["list_s"], r["smdebug"]["values_s"] / r["murphy"]["values_s"]) for r in results)
    print(f"target >= 10x faster than smdebug: worst speed-up {worst:.1f}x → {'OK' if worst >= 10 else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
