"""One fake cluster: the store, the API server over HTTP, the controllers' loop (scheduler, Job
controller, garbage collector), a kubelet running pods as local processes, and the faults."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from murphy.runtimes.catalog import ImageCatalog
from murphy.runtimes.kubernetes_fake.control import Control, ErrorInjector, RequestCounter
from murphy.runtimes.kubernetes_fake.controllers import (
    DEFAULT_CAPACITY,
    GarbageCollector,
    Scheduler,
    node_object,
)
from murphy.runtimes.kubernetes_fake.faults import Faults
from murphy.runtimes.kubernetes_fake.images import ImageResolver, ImageSpec
from murphy.runtimes.kubernetes_fake.jobs import JobController
from murphy.runtimes.kubernetes_fake.kinds import BY_KEY, Kind
from murphy.runtimes.kubernetes_fake.kubelet import Kubelet
from murphy.runtimes.kubernetes_fake.server import Api, HttpServer
from murphy.runtimes.kubernetes_fake.store import Store


class FakeCluster:
    """``FakeCluster(root).start()`` → the API URL; :meth:`stop` kills every container.

    ``namespaces`` exist from the start, each with the ``service_accounts`` (as the deployment
    manifests create ``murphy-workload``) besides ``default``: a pod naming another one is refused
    (403, and the Job controller's FailedCreate event), as by the ServiceAccount admission plugin.
    ``run_as_user``: start containers as their ``runAsUser``/``runAsGroup`` (off by default: the
    host's interpreter may live where that user cannot read, e.g. ``/root/.pyenv``);
    ``read_only_root``: honour ``readOnlyRootFilesystem``; ``backoff_scale`` shortens the
    kubelet's retry delays (image pull back-off, config errors) for tests."""

    def __init__(self, root: str, *, catalog: ImageCatalog | None = None,
                 images: Mapping[str, ImageSpec] | None = None, python: str = sys.executable,
                 namespaces: Sequence[str] = ("default", "murphy-jobs"), service_accounts: Sequence[str] = ("murphy-workload",),
                 capacity: Mapping[str, str] | None = None,
                 node_labels: Mapping[str, str] | None = None, taints: Sequence[Mapping[str, Any]] = (),
                 run_as_user: bool = False, read_only_root: bool = True, watch_history: int = 10000,
                 backoff_scale: float = 1.0, port: int = 0) -> None:
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)
        self.store = Store(tuple(namespaces), history=watch_history)
        for ns in namespaces:
            for sa in service_accounts:
                if self.store.find("serviceaccounts", ns, sa) is None:
                    self.store.create(BY_KEY["serviceaccounts"], ns, {"metadata": {"name": sa}})
        self.store.create(BY_KEY["nodes"], None, node_object({**DEFAULT_CAPACITY, **(capacity or {})},
                                                             dict(node_labels or {}), [dict(t) for t in taints]))
        self.images = ImageResolver(catalog, images, python)
        self.faults = Faults()
        self.requests = RequestCounter()
        self.errors = ErrorInjector()
        self.control = Control(self)
        self.port = port
        self.url = ""
        self.kubeconfig = os.path.join(self.root, "kubeconfig")
        self._log_path = os.path.join(self.root, "fake-apiserver.log")
        self.kubelet = Kubelet(self, os.path.join(self.root, "pods"), run_as_user=run_as_user,
                               read_only_root=read_only_root, backoff_scale=backoff_scale)
        self.scheduler = Scheduler(self)
        self.jobs = JobController(self)
        self.gc = GarbageCollector(self)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._controllers = threading.Thread(target=self._loop, name="fake-controllers", daemon=True)
        self._http = HttpServer(Api(self).app, port)

    @staticmethod
    def kind(key: str) -> Kind:
        return BY_KEY[key]

    def log(self, message: str) -> None:
        with open(self._log_path, "a", encoding="utf-8") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {message}\n")

    def start(self) -> str:
        self.url = self._http.start()
        self.port = int(self.url.rsplit(":", 1)[1])
        self.write_kubeconfig(self.kubeconfig)
        self.store.subscribe(self._wake.set)
        self._controllers.start()
        self.kubelet.start()
        # Containers run in sessions of their own: never leave them behind a test process that exits.
        atexit.register(self.stop)
        return self.url

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.1)
            self._wake.clear()
            for part in (self.scheduler, self.jobs, self.gc):
                try:
                    part.sync_all()
                except Exception as e:  # a controller bug must not stop the others: recorded in the log
                    self.log(f"{type(part).__name__}: {type(e).__name__}: {e}")

    def stop(self) -> None:
        if self._stop.is_set():
            return
        atexit.unregister(self.stop)
        self._stop.set()
        self._wake.set()
        self.kubelet.stop()
        self._controllers.join(timeout=10)
        self._http.stop()

    def _log_tail(self, lines: int = 20) -> str:
        # A controller's error is logged, not raised: a test that times out shows why.
        try:
            with open(self._log_path, encoding="utf-8") as f:
                tail = f.readlines()[-lines:]
        except OSError:
            return ""
        return "; the fake's log ends:\n" + "".join(tail) if tail else ""

    def write_kubeconfig(self, path: str, namespace: str = "default") -> str:
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": "murphy-fake",
               "clusters": [{"name": "murphy-fake", "cluster": {"server": self.url}}],
               "users": [{"name": "murphy-fake", "user": {"token": "murphy-fake-token"}}],
               "contexts": [{"name": "murphy-fake", "context": {"cluster": "murphy-fake", "user": "murphy-fake",
                                                                "namespace": namespace}}]}
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(doc, f)
        return path

    def wait_for(self, predicate: Any, timeout: float = 30.0, what: str = "condition") -> Any:
        """Poll ``predicate()`` until truthy (for tests); raises TimeoutError naming ``what``."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout} s waiting for {what}{self._log_tail()}")
            time.sleep(0.05)
