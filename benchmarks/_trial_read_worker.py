"""One reader's half of benchmarks/trial_read.py: opens a trial with ``--impl``'s create_trial
(murphy's, or the real smdebug's when run by the smdebug venv's python; never imports murphy then),
times listing every step and reading every value, and prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from typing import Any


def _rss_mib() -> float:
    """This process's current resident set (MiB), from /proc."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _requests() -> dict[str, int]:
    """Requests the benchmark's counting proxy has seen so far (empty without one)."""
    url = os.environ.get("MURPHY_BENCH_PROXY")
    if not url:
        return {}
    import urllib.request

    with urllib.request.urlopen(url + "/__proxy_stats", timeout=10) as resp:
        counts: dict[str, int] = json.loads(resp.read())
    return counts


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def _seaweedfs_listing_workaround() -> None:
    """SeaweedFS returns nothing for ListObjectsV2(Prefix=p, StartAfter=p); smdebug's first index
    listing is exactly that. StartAfter="" means the same on AWS S3, so drop it in that case."""
    from smdebug.core.access_layer.s3handler import S3Handler

    orig = S3Handler.list_prefix

    def list_prefix(lr: Any) -> Any:
        if lr.start_after == lr.prefix:
            lr.start_after = ""
        return orig(lr)

    S3Handler.list_prefix = staticmethod(list_prefix)  # type: ignore[method-assign]


def _smdebug_fork_fix() -> None:
    """smdebug fetches index files in a fork()ed multiprocessing pool, but its boto3 client is an
    lru_cache of the parent, already used for the listing: every child inherits the parent's
    kept-alive socket, so children read each other's responses (wrong bytes) or wait for one that
    another child consumed (botocore's 60 s read timeout). Clearing the cache in each child gives
    every child its own client, which is what smdebug meant to do."""
    import os

    from smdebug.core.access_layer.s3handler import S3Handler

    os.register_at_fork(after_in_child=S3Handler.client.cache_clear)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["murphy", "smdebug"], required=True)
    ap.add_argument("--value-steps", type=int, default=0, help="read values of the first N steps only (0: all)")
    ap.add_argument("--seaweedfs-workaround", action="store_true")
    ap.add_argument("--fork-fix", action="store_true", help="smdebug: one boto3 client per pool child")
    ap.add_argument("path")
    args = ap.parse_args()
    t_import = time.perf_counter()
    if args.path.startswith("s3://"):
        # Both readers talk to S3 through boto3; smdebug imports it with its own modules, murphy
        # only when it opens an S3 store. Import it here, untimed, for both, so that neither
        # timed region pays for the import (each still creates its own client inside it).
        import boto3  # noqa: F401
    if args.impl == "smdebug":
        from smdebug.trials import create_trial

        if args.seaweedfs_workaround:
            _seaweedfs_listing_workaround()
        if args.fork_fix:
            _smdebug_fork_fix()
    else:
        from murphy.trial import create_trial  # type: ignore[no-redef]
    base_rss = _rss_mib()
    r0 = _requests()
    t0 = time.perf_counter()
    trial = create_trial(args.path)
    steps = trial.steps()
    names = trial.tensor_names()
    t1 = time.perf_counter()
    r1 = _requests()
    open_peak = _peak_mib()
    read_steps = steps[: args.value_steps] if args.value_steps else steps
    total, n = 0.0, 0
    for name in names:
        t = trial.tensor(name)
        for s in read_steps:
            total += float(t.value(s).sum())
            n += 1
    t2 = time.perf_counter()
    r2 = _requests()
    print(json.dumps({
        "impl": args.impl, "import_s": t0 - t_import, "list_s": t1 - t0, "values_s": t2 - t1,
        "steps": len(steps), "tensors": len(names), "values": n, "checksum": total,
        # Memory: the resident set before opening (interpreter + imports), the peak after open +
        # list, and the peak after reading the values.
        "rss_base_mib": base_rss, "rss_open_peak_mib": open_peak, "rss_read_peak_mib": _peak_mib(),
        # smdebug reads index files in fork()ed pool children: the largest child's peak.
        "rss_children_peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "requests_open": _delta(r1, r0), "requests_values": _delta(r2, r1),
    }))


if __name__ == "__main__":
    main()
