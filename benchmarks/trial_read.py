"""Trial reading, murphy vs the real smdebug 1.0.34, on the same 1,000-step x 50-tensor trial.

The trial (1 worker, TRAIN mode, float32 8x16 tensors) is written with murphy's writer
(murphy.tensorio.writer.StepWriter; the compat suite proves it byte-layout-identical to smdebug's
FileWriter). Each reader runs in a fresh process (smdebug in its own venv): time to open the trial
and list every step, and time to read every value. S3: SeaweedFS started by this script (or
--s3-endpoint); smdebug needs a one-line listing workaround there (see _trial_read_worker.py).
On S3, smdebug is timed twice: as shipped, and with its fork()ed-pool bug fixed (one boto3 client
per pool child; as shipped the children share the parent's socket and hit 60 s read timeouts or
read each other's responses). The speed-up is against the faster of the two that read correctly.

The trial carries murphy's step manifest, written as murphy's hook writes it (murphy.tensorio.
manifest: one segment per 100 index files, under a prefix smdebug never lists), so both readers
read the same objects and smdebug simply ignores the segments. On S3 the script also counts every
request each reader makes (a loopback proxy in front of the server, benchmarks/_s3_proxy.py),
and repeats open + list with 20 ms added to every request (a real S3 round trip), and each
reader process reports its memory (resident set before opening, peaks after open + list and
after reading).

usage: python benchmarks/trial_read.py [--steps 1000] [--tensors 50] [--s3-value-steps 5] [--no-s3]
                                       [--latency-ms 20] [--parts local,s3,requests,latency]
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
    from murphy.tensorio.manifest import ManifestWriter
    from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training

    store = LocalObjectStore(str(root))
    names = [f"Net_layer{i}.weight" for i in range(tensors)]
    write_collections(store, CollectionsDoc({"weights": Collection("weights", include_regex=["weight"], tensor_names=names)}, 1))
    rng = np.random.default_rng(0)
    manifest = ManifestWriter(store, "worker_0")  # what the hook's writer thread does
    manifest.begin()
    for step in range(steps):
        w = StepWriter(store, step, "worker_0", ModeKeys.TRAIN, step)
        for name in names:
            w.add(name, rng.standard_normal((8, 16), dtype=np.float32))
        w.close()
        if w.index_bytes is not None:
            manifest.add(w.index_file_name, step, w.index_bytes)
    manifest.flush()
    write_end_of_training(store)


def upload(root: Path, server: Any, bucket: str, prefix: str) -> None:
    client = server.client()
    for p in root.rglob("*"):
        if p.is_file():
            client.put_object(Bucket=bucket, Key=f"{prefix}/{p.relative_to(root)}", Body=p.read_bytes())


def _agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a["steps"] == b["steps"] and a["values"] == b["values"] and np.isclose(a["checksum"], b["checksum"], rtol=1e-9))


def measure(label: str, path: str, env: dict[str, str], sm_py: str, value_steps: int, sm_extra: list[str],
            fork_fix: bool = False, shipped: bool = True) -> dict[str, Any]:
    """murphy, then smdebug as shipped, then (S3) smdebug with its fork bug fixed. smdebug as shipped
    may return wrong values on S3 (see _trial_read_worker._smdebug_fork_fix): that is recorded, not
    fatal; any other disagreement is."""
    vs = ["--value-steps", str(value_steps)]
    m = run_json([sys.executable, WORKER, "--impl", "murphy", *vs, path], env=env)
    out: dict[str, Any] = {"label": label, "murphy": m}
    if shipped:
        s = run_json([sm_py, WORKER, "--impl", "smdebug", *vs, *sm_extra, path], env=env)
        s["correct"] = _agree(m, s)
        out["smdebug"] = s
    if fork_fix:
        f = run_json([sm_py, WORKER, "--impl", "smdebug", *vs, *sm_extra, "--fork-fix", path], env=env)
        f["correct"] = _agree(m, f)
        out["smdebug_fixed"] = f
    fair = out.get("smdebug_fixed", out.get("smdebug"))
    if fair is None or not fair["correct"]:
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
    ap.add_argument("--latency-ms", type=float, default=20.0, help="per-request latency of the second S3 round (0: skip it)")
    ap.add_argument("--no-s3", action="store_true")
    ap.add_argument("--parts", default="local,s3,requests,latency",
                    help="comma list of rounds to run: local, s3 (timed), requests (counted), latency")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sm_py = smdebug_python()
    tmp = Path(tempfile.mkdtemp(prefix="murphy-trial-bench-"))
    results = []
    try:
        t0 = time.monotonic()
        write_trial(tmp / "trial", args.steps, args.tensors)
        print(f"wrote {args.steps} steps x {args.tensors} tensors in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MURPHY_S3", "MURPHY_BENCH"))}
        env["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"  # the trial is finished; don't sleep 1 s
        parts = set(args.parts.split(","))
        if "local" in parts:
            results.append(measure("local", str(tmp / "trial"), env, sm_py, 0, []))
        if not args.no_s3 and parts & {"s3", "requests", "latency"}:
            results += measure_s3(tmp / "trial", env, sm_py, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(results, args)


def measure_s3(root: Path, env: dict[str, str], sm_py: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Timed directly against the server; request counts through the proxy (it costs CPU on the
    same cores, so its runs are not the timed ones); then open + list with added latency."""
    from _s3_proxy import S3Proxy

    server = _start_s3(args.s3_endpoint)
    out = []
    try:
        import servers

        bucket = servers.new_bucket(server, prefix="bench")
        upload(root, server, bucket, "trial")
        uri, sw = f"s3://{bucket}/trial", ["--seaweedfs-workaround"]
        s3env = {**env, **server.env()}
        parts = set(args.parts.split(","))
        if "s3" in parts:
            out.append(measure(f"s3 ({server.name})", uri, s3env, sm_py, args.s3_value_steps, sw, fork_fix=True))
        with S3Proxy(server.endpoint_url) as proxy:
            penv = {**s3env, **_endpoint_env(proxy.url), "MURPHY_BENCH_PROXY": proxy.url}
            if "requests" in parts:
                counted = measure("s3 requests", uri, penv, sm_py, args.s3_value_steps, sw, fork_fix=True, shipped=False)
                counted["counted_only"] = True
                out.append(counted)
            if args.latency_ms > 0 and "latency" in parts:
                proxy.delay_s = args.latency_ms / 1000
                out.append(measure(f"s3 +{args.latency_ms:g} ms/request", uri, penv, sm_py, 1, sw,
                                   fork_fix=True, shipped=False))
    finally:
        server.stop()
    return out


def _endpoint_env(url: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": url, "AWS_ENDPOINT_URL_S3": url, "MURPHY_S3_ENDPOINT_URL": url}


def _fmt_requests(r: dict[str, int]) -> str:
    return " ".join(f"{k} {v}" for k, v in sorted(r.items())) or "-"


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Speed-ups are against the faster correct smdebug: on S3 that is smdebug with its fork bug
    fixed, so the verdict never credits murphy with smdebug's 60 s timeouts."""
    rows, verdicts = [], []
    for r in results:
        if r.get("counted_only"):
            continue  # timed through the counting proxy: its figures are counts, not times
        m, s, f = r["murphy"], r.get("smdebug"), r.get("smdebug_fixed")
        latency = r["label"].startswith("s3 +")
        ops = [("open + list steps", "list_s", f"{m['steps']} steps")]
        if not latency:
            ops.append(("read every value", "values_s", f"{m['values']} values"))
        for op, key, size in ops:
            shipped = "-" if s is None else f"{s[key]:.3f}" + ("" if s["correct"] else " (wrong values)")
            fair = min(x[key] for x in (s, f) if x is not None and x["correct"])
            speedup = fair / m[key]
            rows.append([r["label"], op, size, f"{m[key]:.3f}", shipped, "-" if f is None else f"{f[key]:.3f}",
                         f"{speedup:.1f}x"])
            if r["label"] == "local":
                verdicts.append((f"local {op}", speedup, 10.0))
            elif latency:
                verdicts.append((f"S3 {op}, {args.latency_ms:g} ms per request", speedup, 50.0))
            elif key == "list_s":
                verdicts.append((f"S3 {op}", speedup, 20.0))
    print(f"trial read — {machine()}, {args.steps} steps x {args.tensors} tensors, {time.strftime('%Y-%m-%d')}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(table(["store", "operation", "size", "murphy s", "smdebug s (as shipped)", "smdebug s (fork fix)",
                 "speed-up vs faster smdebug"], rows))
    counted = [r for r in results if r.get("counted_only")]
    if counted:
        c = counted[0]
        print("\nS3 requests per operation (counted at a loopback proxy; smdebug with its fork fix)")
        print(table(["operation", "murphy", "smdebug"], [
            ["open + list steps + tensor names", _fmt_requests(c["murphy"]["requests_open"]),
             _fmt_requests(c["smdebug_fixed"]["requests_open"])],
            [f"read values of {args.s3_value_steps} steps", _fmt_requests(c["murphy"]["requests_values"]),
             _fmt_requests(c["smdebug_fixed"]["requests_values"])],
        ]))
    mem = []
    for r in results:
        for who in ("murphy", "smdebug_fixed", "smdebug"):
            x = r.get(who)
            if x is None or r["label"].startswith("s3 +") or r.get("counted_only"):
                continue
            mem.append([r["label"], who.replace("_fixed", " (fork fix)"), f"{x['rss_base_mib']:.0f}",
                        f"{x['rss_open_peak_mib']:.0f}", f"{x['rss_read_peak_mib']:.0f}",
                        f"{x['rss_children_peak_mib']:.0f}",
                        f"{(x['rss_open_peak_mib'] - x['rss_base_mib']) * 1024 / max(1, x['steps']):.1f}"])
    if mem:
        print("\npeak resident memory, MiB (base: after imports, before create_trial; children: smdebug's pool)")
        print(table(["store", "reader", "base", "peak after open + list", "peak after reading", "children peak",
                     "open growth KiB/step"], mem))
    for what, speedup, target in verdicts:
        print(f"target {what} >= {target:g}x smdebug: {speedup:.1f}x → {'OK' if speedup >= target else 'MISSED'}")
    for r in results:
        m, f = r["murphy"], r.get("smdebug_fixed", r.get("smdebug"))
        if f is not None and not r.get("counted_only") and not r["label"].startswith("s3 +"):
            ok = m["rss_read_peak_mib"] <= f["rss_read_peak_mib"] + f["rss_children_peak_mib"]
            print(f"target {r['label']} peak memory murphy <= smdebug: {m['rss_read_peak_mib']:.0f} vs "
                  f"{f['rss_read_peak_mib']:.0f} (+{f['rss_children_peak_mib']:.0f} in children) MiB → {'OK' if ok else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
