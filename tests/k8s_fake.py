"""The fake Kubernetes API server (``murphy.runtimes.kubernetes_fake``) for tests: a fixture
``fake_k8s`` (one fake cluster per test, under the test's tmp_path, stopped after it) and
:func:`fake_cluster` for other scopes. Use it from a test module with
``from k8s_fake import fake_k8s  # noqa: F401`` (and ``# ruff: noqa: F811``, as the parameters redefine it) (tests/ is on sys.path through conftest.py).

The fake's kubelet gives each container its own mounts through a mount namespace: as root (CI)
or with unprivileged user namespaces. Where neither works the fixture skips locally and fails
in CI (``CI=true``), so the tests always run there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from murphy.runtimes.kubernetes_fake import FakeCluster

#: Test images: a Python with no entrypoint of its own (pods give it a command).
TEST_IMAGES: dict[str, Any] = {"example.com/trainer:*": {"cmd": ["python3"]}}


def namespaces_available() -> str | None:
    """None if this host lets the fake kubelet make mount namespaces, else why not."""
    probe = subprocess.run([sys.executable, "-c",
                            "from murphy.container.namespace import _libc, _unshare; _unshare(_libc())"],
                           capture_output=True, text=True, timeout=30)
    return None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["unshare failed"])[-1]


@contextmanager
def fake_cluster(root: str | os.PathLike[str], **options: Any) -> Iterator[FakeCluster]:
    why = namespaces_available()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the fake kubelet needs mount namespaces (root or unprivileged user namespaces): {why}")
        pytest.skip(f"the fake kubelet needs mount namespaces (root or unprivileged user namespaces): {why}")
    options.setdefault("images", TEST_IMAGES)
    cluster = FakeCluster(str(root), **options)
    cluster.start()
    try:
        yield cluster
    finally:
        for c in _CLIENTS.pop(id(cluster), []):
            c.close()
        cluster.stop()


_CLIENTS: dict[int, list[Any]] = {}


def lightkube_client(cluster: FakeCluster, namespace: str = "default") -> Any:
    """A lightkube ``Client`` for ``cluster``'s kubeconfig, closed when the cluster stops (a watch
    left early keeps its connection open until then)."""
    from lightkube import Client, KubeConfig

    client = Client(KubeConfig.from_file(cluster.kubeconfig), namespace=namespace)
    _CLIENTS.setdefault(id(cluster), []).append(client)
    return client


@pytest.fixture
def fake_k8s(tmp_path: Path) -> Iterator[FakeCluster]:
    with fake_cluster(tmp_path / "fake-k8s") as cluster:
        yield cluster
