"""Requests per rule poll on S3, as a trial grows (benchmarks/rule_throughput.py --s3).

A rule container's engine calls ``trial.refresh()`` once per round, then reads the new steps'
values. This drives exactly that on a live S3 trial: a writer (murphy's StepWriter plus the step
manifest, as the hook's writer thread does) puts steps on SeaweedFS directly, and a murphy trial
reads them through the counting proxy (benchmarks/_s3_proxy.py). For each number of steps
already present it writes a few new steps, polls once, and reports the requests that poll made,
split into discovery (LIST, HEAD, index/manifest GETs) and the values of the new steps (what
ExplodingTensor reads: every tensor of every new step).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _rules_data import LAYERS, gradient_name, weight_name, write_collections_file, write_step  # noqa: E402
from _s3_proxy import S3Proxy  # noqa: E402

PLAN = ((100, 1), (100, 10), (1000, 1), (1000, 10), (3000, 1), (3000, 10), (3000, 500))
"""(steps present before the poll, new steps the poll finds)."""


def _write(store: Any, manifest: Any, start: int, n: int, rng: np.random.Generator) -> None:
    for step in range(start, start + n):
        index = write_step(store, step, rng)
        manifest.add(index[0], step, index[1])


def measure(repo: Path) -> list[dict[str, Any]]:
    sys.path.insert(0, str(repo / "tests"))
    import os

    import servers
    from murphy.storage import open_store
    from murphy.tensorio.manifest import ManifestWriter
    from murphy.trial import create_trial

    server = servers.start("seaweedfs")
    rows: list[dict[str, Any]] = []
    # Credentials and region for both stores; each store gets its endpoint explicitly.
    os.environ.update({k: v for k, v in server.env().items() if "ENDPOINT" not in k})
    try:
        bucket = servers.new_bucket(server, prefix="polls")
        uri = f"s3://{bucket}/trial"
        writer_store = open_store(uri, s3_endpoint_url=server.endpoint_url)
        write_collections_file(writer_store)
        manifest = ManifestWriter(writer_store, "worker_0")
        manifest.begin()
        rng = np.random.default_rng(0)
        names = [weight_name(layer) for layer in LAYERS] + [gradient_name(layer) for layer in LAYERS]
        with S3Proxy(server.endpoint_url) as proxy:
            trial = create_trial(open_store(uri, s3_endpoint_url=proxy.url), end_delay=0)
            written = 0
            for present, new in PLAN:
                if present > written:  # grow to `present`, polling as a live rule would
                    while written < present:
                        n = min(100, present - written)
                        _write(writer_store, manifest, written, n, rng)
                        written += n
                        trial.refresh()
                _write(writer_store, manifest, written, new, rng)
                first_new, written = written, written + new
                proxy.reset()
                trial.refresh()
                discovery = proxy.snapshot()
                proxy.reset()
                for step in range(first_new, written):
                    for name in names:
                        trial.tensor(name).value(step)
                values = proxy.snapshot()
                rows.append({"present": present, "new": new, "discovery": discovery, "values": values,
                             "steps_seen": len(trial.steps(show_incomplete_steps=True))})
    finally:
        server.stop()
    return rows


def report(rows: list[dict[str, Any]], table: Any) -> str:
    out = []
    for r in rows:
        d, v = r["discovery"], r["values"]
        out.append([str(r["present"]), str(r["new"]), str(d.get("LIST", 0)), str(d.get("HEAD", 0)),
                    str(d.get("GET", 0)), str(sum(d.values())), str(v.get("GET", 0))])
    text: str = table(["steps present", "new steps", "LIST", "HEAD", "GET (index/manifest)", "discovery total",
                  "GET values (8 tensors/step)"], out)
    small = [sum(r["discovery"].values()) for r in rows if r["new"] <= 10]
    bounded = max(small) - min(small) <= 10 and all(
        sum(r["discovery"].values()) <= 3 + r["new"] for r in rows if r["new"] <= 10)
    return text + (f"\ndiscovery requests per poll bounded by the new steps, independent of the steps present: "
                   f"{'OK' if bounded else 'MISSED'}")
