"""``python -m murphy.runtimes.kubernetes_fake --root DIR``: serve a fake cluster until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from murphy.runtimes.catalog import ImageCatalog
from murphy.runtimes.kubernetes_fake.cluster import FakeCluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m murphy.runtimes.kubernetes_fake",
                                     description="A fake Kubernetes API server whose kubelet runs pods as local processes.")
    parser.add_argument("--root", required=True, help="directory for pods' volumes, logs and the kubeconfig")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free one)")
    parser.add_argument("--catalog", help="an image catalog file (as MURPHY_IMAGE_CATALOG)")
    parser.add_argument("--namespace", action="append", default=[], help="a namespace to create (repeatable)")
    args = parser.parse_args(argv)
    cluster = FakeCluster(args.root, catalog=ImageCatalog.load(args.catalog), port=args.port,
                          namespaces=("default", "murphy-jobs", *args.namespace))
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    url = cluster.start()
    print(f"{url} {cluster.kubeconfig}", flush=True)
    try:
        done.wait()
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
