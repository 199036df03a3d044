"""One reader's half of benchmarks/trial_read.py: opens a trial with ``--impl``'s create_trial
(murphy's, or the real smdebug's when run by the smdebug venv's python; never imports murphy then),
times listing every step and reading every value, and prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any


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
    t0 = time.perf_counter()
    trial = create_trial(args.path)
    steps = trial.steps()
    names = trial.tensor_names()
    t1 = time.perf_counter()
    read_steps = steps[: args.value_steps] if args.value_steps else steps
    total, n = 0.0, 0
    for name in names:
        t = trial.tensor(name)
        for s in read_steps:
            total += float(t.value(s).sum())
            n += 1
    t2 = time.perf_counter()
    print(json.dumps({
        "impl": args.impl, "import_s": t0 - t_import, "list_s": t1 - t0, "values_s": t2 - t1,
        "steps": len(steps), "tensors": len(names), "values": n, "checksum": total,
    }))


if __name__ == "__main__":
    main()
