"""A project-owned fake Kubernetes API server, for testing murphy's Kubernetes runtime without a
cluster: real HTTP on 127.0.0.1, real clients (lightkube, ``kubectl``), and a kubelet that runs
pods' containers as local processes.

Usage from Python (tests, benchmarks)::

    from murphy.runtimes.kubernetes_fake import start_fake_apiserver

    url, kubeconfig, stop = start_fake_apiserver("/tmp/somewhere", images={"example.com/trainer:*": ["python3", "train.py"]})
    try:
        # lightkube: Client(KubeConfig.from_file(kubeconfig)) or KubeConfig.from_server(url)
        # kubectl:   kubectl --kubeconfig <kubeconfig> apply --validate=false -f objects.yaml
        ...
    finally:
        stop()  # kills every container still running

or ``cluster = FakeCluster(root, ...); cluster.start()`` for the object itself (its ``faults``,
``store``, ``requests``, ``kubelet``); the pytest fixture is ``tests/kubernetes_fake.py``
(``fake_k8s``). From a shell::

    python -m murphy.runtimes.kubernetes_fake --root /tmp/fake-k8s [--port 0] [--catalog FILE]

prints the URL, writes ``<root>/kubeconfig`` and serves until SIGINT/SIGTERM.

What it serves (``docs/kubernetes.md``, "The fake API server"): discovery, ``/version``,
``/healthz``; namespaced create/get/list/replace/patch (merge, strategic merge, JSON patch,
server-side apply)/delete of ConfigMaps, Secrets, Services, ServiceAccounts, Pods (with
``status`` and ``log``), Events (core/v1 and events.k8s.io/v1), batch/v1 Jobs (with
``status``), Namespaces and the one Node; label selectors (equality and set-based), field
selectors, ``resourceVersion``, ``limit``/``continue``, ``?watch=true`` streams (ADDED,
MODIFIED, DELETED, resume from a resourceVersion, 410 Gone once compacted); ``Status`` error
bodies (404 NotFound, 409 AlreadyExists/Conflict, 422 Invalid, 400 BadRequest); garbage
collection by ownerReferences with Foreground/Background/Orphan propagation; graceful pod
deletion (SIGTERM, SIGKILL after the grace period). Controllers: the scheduler (one node,
capacity and selectors), the Job controller (:mod:`.jobs`), the kubelet (:mod:`.kubelet`).
Faults for failure mapping: :mod:`.faults`. Images to local programs: :mod:`.images`.
Linux only (containers get their mounts through mount namespaces: root, or unprivileged user
namespaces). Not murphy's runtime code: nothing under ``murphy`` but tests imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from murphy.runtimes.catalog import ImageCatalog
from murphy.runtimes.kubernetes_fake.cluster import FakeCluster
from murphy.runtimes.kubernetes_fake.images import ImageSpec

__all__ = ["FakeCluster", "ImageSpec", "start_fake_apiserver"]


def start_fake_apiserver(root: str, *, catalog: ImageCatalog | None = None,
                         images: Mapping[str, ImageSpec] | None = None,
                         **options: Any) -> tuple[str, str, Callable[[], None]]:
    """Start a fake cluster under ``root``: ``(url, kubeconfig path, stop)``. ``images`` maps
    fnmatch patterns of image references to their ENTRYPOINT, or to ``{"entrypoint": [...],
    "cmd": [...]}`` (before ``catalog``, murphy's image catalog; ``python:*``, ``busybox*``,
    ``murphy/python:*`` are known); ``options`` are :class:`FakeCluster`'s."""
    cluster = FakeCluster(root, catalog=catalog, images=images, **options)
    url = cluster.start()
    return url, cluster.kubeconfig, cluster.stop
