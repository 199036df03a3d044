"""Trial reading, murphy vs the real smdebug 1.0.34, on the same 1,000-step x 50-tensor trial.

The trial (1 worker, TRAIN mode, float32 8x16 tensors) is written with murphy's writer
(murphy.tensorio.writer.StepWriter; the compat suite proves it byte-layout-identical to smdebug's
FileWriter). Each reader runs in a fresh process (smdebug in its own venv): time to open the trial
and list every step, and time to read every value. S3: SeaweedFS started by this script (or
--s3-endpoint); smdebug needs a one-line listing workaround there (see _trial_read_worker.py).
On S3, smdebug is timed twice: as shipped, and with its fork()ed-pool bug fixed (one boto3 client
per pool child; as shipped the children share the parent's socket and hit 60 s read timeouts or
read each other's responses). The speed-up is against the faster of the two that read correctly.

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


def _agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a["steps"] == b["steps"] and a["values"] == b["values"] and np.isclose(a["checksum"], b["checksum"], rtol=1e-9))


def measure(label: str, path: str, env: dict[str, str], sm_py: str, value_steps: int, sm_extra: list[str],
            fork_fix: bool = False) -> dict[str, Any]:
    """murphy, then smdebug as shipped, then (S3) smdebug with its fork bug fixed. smdebug as shipped
    may return wrong values on S3 (see _trial_read_worker._smdebug_fork_fix): that is recorded, not
    fatal; any other disagreement is."""
    vs = ["--value-steps", str(value_steps)]
    m = run_json([sys.executable, WORKER, "--impl", "murphy", *vs, path], env=env)
    s = run_json([sm_py, WORKER, "--impl", "smdebug", *vs, *sm_extra, path], env=env)
    s["correct"] = _agree(m, s)
    out = {"label": label, "murphy": m, "smdebug": s}
    if fork_fix:
        f = run_json([sm_py, WORKER, "--impl", "smdebug", *vs, *sm_extra, "--fork-fix", path], env=env)
        f["correct"] = _agree(m, f)
        out["smdebug_fixed"] = f
    fair = out.get("smdebug_fixed", s)
    if not fair["correct"]:
        sys.exit(f"{label}: readers disagree: murphy {m} vs smdebug {fair}")
    return out


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
                                       args.s3_value_steps, ["--seaweedfs-workaround"], fork_fix=True))
            finally:
                server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(results, args)


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Speed-ups are against the faster correct smdebug: on S3 that is smdebug with its fork bug
    fixed, so the verdict never credits murphy with smdebug's 60 s timeouts."""
    rows, speedups = [], []
    for r in results:
        m, s, f = r["murphy"], r["smdebug"], r.get("smdebug_fixed")
        for op, key, size in (("open + list steps", "list_s", f"{m['steps']} steps"),
                              ("read every value", "values_s", f"{m['values']} values")):
            shipped = f"{s[key]:.3f}" + ("" if s["correct"] else " (wrong values)")
            fair = min(x[key] for x in (s, f) if x is not None and x["correct"])
            speedups.append(fair / m[key])
            rows.append([r["label"], op, size, f"{m[key]:.3f}", shipped, "-" if f is None else f"{f[key]:.3f}",
                         f"{fair / m[key]:.1f}x"])
    print(f"trial read — {machine()}, {args.steps} steps x {args.tensors} tensors, {time.strftime('%Y-%m-%d')}")
    print(table(["store", "operation", "size", "murphy s", "smdebug s (as shipped)", "smdebug s (fork fix)",
                 "speed-up vs faster smdebug"], rows))
    worst = min(speedups)
    print(f"target >= 10x faster than smdebug: worst speed-up {worst:.1f}x → {'OK' if worst >= 10 else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
