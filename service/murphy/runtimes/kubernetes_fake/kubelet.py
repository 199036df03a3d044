"""The fake kubelet: runs the containers of the pods bound to its node as local processes.

Per pod: volumes in ``<root>/<namespace>/<pod>-<uid>/volumes/`` (emptyDir, configMap, secret),
``/etc/hosts`` with the pod's hostname and, for a ``subdomain`` backed by a headless Service,
its peers' names (as cluster DNS would resolve them), then the init containers one by one and
the app containers together, each through :mod:`.sandbox` (its mounts at their paths, its user,
a read-only root where asked). Status as a kubelet reports it: phase, conditions,
``containerStatuses`` (waiting reasons ContainerCreating/PodInitializing/ErrImagePull/
ImagePullBackOff/InvalidImageName/CreateContainerConfigError, running, terminated with exit
code, reason ``Completed``/``Error``/``OOMKilled`` and the termination message). Deletion:
SIGTERM to each container, SIGKILL to what is left after the grace period, then the pod object
goes. Events: Pulling, Pulled, Failed, BackOff, Created, Started, Killing, FailedMount.
Native sidecars (init containers with ``restartPolicy: Always``) start before the app containers
and get SIGTERM once those are done. ``restartPolicy: Never`` only (no container is restarted).
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING

from murphy.runtimes.kubernetes_fake.errors import bad_request, not_found
from murphy.runtimes.kubernetes_fake.logs import LogBuffer
from murphy.runtimes.kubernetes_fake.pod_worker import PodWorker
from murphy.runtimes.kubernetes_fake.recorder import NODE
from murphy.runtimes.kubernetes_fake.selectors import match_label_selector

if TYPE_CHECKING:
    from murphy.runtimes.kubernetes_fake.cluster import FakeCluster


class Kubelet:
    def __init__(self, cluster: FakeCluster, root: str, *, run_as_user: bool = False, read_only_root: bool = True,
                 backoff_scale: float = 1.0) -> None:
        self.cluster, self.root = cluster, root
        self.images = cluster.images
        self.run_as_user, self.read_only_root, self.backoff_scale = run_as_user, read_only_root, backoff_scale
        self.workers: dict[str, PodWorker] = {}
        self._ips = (f"127.0.{a}.{b}" for a, b in itertools.product(range(1, 255), range(2, 255)))
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fake-kubelet", daemon=True)
        self.lock = threading.RLock()
        self._hosts_signature: object = None

    def poke(self) -> None:
        self._wake.set()

    def on_output(self, ended: bool) -> None:
        """A container wrote a line: wake the log followers; its output ended: wake this loop
        too, to notice the exit at once."""
        self.cluster.store.notify_logs()
        if ended:
            self._wake.set()

    def start(self) -> None:
        self.cluster.store.subscribe(self.poke)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        with self.lock:
            for w in self.workers.values():
                w.stop()
            self.workers.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.2)
            self._wake.clear()
            try:
                self.sync_once()
            except Exception as e:  # a kubelet bug must not kill the node: log it in the cluster's log
                self.cluster.log(f"kubelet: {type(e).__name__}: {e}")

    def sync_once(self) -> None:
        pods, _ = self.cluster.store.list(self.cluster.kind("pods"), None, lambda o: (o.get("spec") or {}).get("nodeName") == NODE)
        seen = set()
        with self.lock:
            for pod in pods:
                uid = pod["metadata"]["uid"]
                seen.add(uid)
                worker = self.workers.get(uid)
                if worker is None:
                    worker = self.workers[uid] = PodWorker(self, pod, next(self._ips))
                worker.sync(pod)
            for uid in [u for u in self.workers if u not in seen]:
                # Gone from the API (force-deleted, or its graceful deletion finished): its logs go too.
                self.workers.pop(uid).stop()
            # Names follow pods and headless Services as they come and go, as cluster DNS does.
            services = sorted((s["metadata"]["namespace"], s["metadata"]["name"], str((s.get("spec") or {}).get("selector")))
                              for s in self.cluster.store.iter_all("services") if (s.get("spec") or {}).get("clusterIP") == "None")
            signature = (tuple(sorted((w.ns, w.uid, w.volumes_ready) for w in self.workers.values())), tuple(services))
            if signature != self._hosts_signature:
                self._hosts_signature = signature
                for ns in {w.ns for w in self.workers.values() if w.volumes_ready}:
                    self.update_hosts(ns)

    def update_hosts(self, ns: str) -> None:
        """Rewrite (in place: the containers have them bind-mounted) the /etc/hosts of the pods of ``ns``."""
        store = self.cluster.store
        services = [s for s in store.iter_all("services") if s["metadata"].get("namespace") == ns
                    and (s.get("spec") or {}).get("clusterIP") == "None"]
        with self.lock:
            workers = [w for w in self.workers.values() if w.ns == ns]
            pods = {w.uid: store.find("pods", ns, w.name) for w in workers}
            for w in workers:
                lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
                for peer in workers:
                    pod = pods.get(peer.uid)
                    if pod is None:
                        continue
                    sub = (pod.get("spec") or {}).get("subdomain")
                    fqdn = ""
                    if sub and any(s["metadata"]["name"] == sub and match_label_selector(
                            {"matchLabels": (s.get("spec") or {}).get("selector") or {}},
                            pod["metadata"].get("labels") or {}) for s in services):
                        fqdn = f"{peer.hostname}.{sub}.{ns}.svc.cluster.local\t{peer.hostname}.{sub}\t"
                    if peer is w or fqdn:
                        lines.append(f"{peer.pod_ip}\t{fqdn}{peer.hostname}")
                text = "\n".join(lines) + "\n"
                with open(w.hosts_file, "a+", encoding="utf-8") as f:
                    f.seek(0)
                    if f.read() != text:
                        f.seek(0)
                        f.truncate()
                        f.write(text)

    def rotate_logs(self, ns: str | None = None, name: str | None = None) -> int:
        """End the follow streams of every container (of pod ``ns/name``): the client must
        reconnect and resume, as after a log rotation or an API server restart. Returns how many
        containers' logs were rotated."""
        n = 0
        with self.lock:
            for w in self.workers.values():
                if (ns is None or w.ns == ns) and (name is None or w.name == name):
                    for c in w.runs:
                        if c.buffer is not None:
                            c.buffer.rotate()
                            n += 1
        self.cluster.store.notify_logs()
        return n

    def log_buffer(self, ns: str, name: str, container: str | None, previous: bool = False) -> LogBuffer:
        pod = self.cluster.store.find("pods", ns, name)
        if pod is None:
            raise not_found("pods", "", name)
        names = [c["name"] for c in pod["spec"].get("containers") or []]
        inits = [c["name"] for c in pod["spec"].get("initContainers") or []]
        if container is None:
            if len(names) != 1:
                raise bad_request(f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
                                  + (f" or one of the init containers: [{' '.join(inits)}]" if inits else ""))
            container = names[0]
        if container not in names and container not in inits:
            raise bad_request(f"container {container} is not valid for pod {name}")
        if previous:
            raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        with self.lock:
            worker = self.workers.get(pod["metadata"]["uid"])
            run = next((c for c in worker.runs if c.name == container), None) if worker else None
        if run is None or run.buffer is None:
            reason = run.waiting[0] if run is not None else "ContainerCreating"
            raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
        return run.buffer
