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
``restartPolicy: Never`` only (a failed container is not restarted).
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

from murphy.runtimes.kubernetes_fake import podenv
from murphy.runtimes.kubernetes_fake.containers import ContainerRun, python_for_sandbox
from murphy.runtimes.kubernetes_fake.errors import ApiStatusError, bad_request, not_found
from murphy.runtimes.kubernetes_fake.images import PullError
from murphy.runtimes.kubernetes_fake.logs import LogBuffer
from murphy.runtimes.kubernetes_fake.recorder import NODE, record
from murphy.runtimes.kubernetes_fake.selectors import match_label_selector
from murphy.runtimes.kubernetes_fake.store import Obj, now_iso

if TYPE_CHECKING:
    from murphy.runtimes.kubernetes_fake.cluster import FakeCluster

_RUNTIME_FAULTS = ("OOMKilled", "Evicted", "Preempted", "EvictionByEvictionAPI")
_DISRUPTION_REASON = {"Evicted": "TerminationByKubelet", "Preempted": "PreemptionByScheduler",
                      "EvictionByEvictionAPI": "EvictionByEvictionAPI"}


class PodWorker:
    def __init__(self, kubelet: Kubelet, pod: Obj, pod_ip: str) -> None:
        self.kubelet, self.cluster = kubelet, kubelet.cluster
        meta, spec = pod["metadata"], pod["spec"]
        self.ns, self.name, self.uid = meta["namespace"], meta["name"], meta["uid"]
        self.dir = os.path.join(kubelet.root, self.ns, f"{self.name}-{self.uid[:8]}")
        os.makedirs(os.path.join(self.dir, "volumes"), exist_ok=True)
        self.pod_ip = pod_ip
        self.hostname = spec.get("hostname") or self.name
        self.hosts_file = os.path.join(self.dir, "etc-hosts")
        self.inits = [ContainerRun(c, True, self.dir) for c in spec.get("initContainers") or []]
        self.apps = [ContainerRun(c, False, self.dir) for c in spec.get("containers") or []]
        first = "PodInitializing" if self.inits else "ContainerCreating"
        for c in [*self.inits, *self.apps]:
            c.waiting = (first, "")
        self.volumes_ready = False
        self.next_volume_try = 0.0
        self.start_time = now_iso()
        self.transitions: dict[str, tuple[str, str]] = {}
        self.kill_at: float | None = None
        self.pod_reason = self.pod_message = ""
        self.disruption: tuple[str, str] | None = None
        self.runtime_fault_done = False
        self.removed = False

    @property
    def runs(self) -> list[ContainerRun]:
        return [*self.inits, *self.apps]

    def event(self, pod: Obj, type_: str, reason: str, message: str, c: ContainerRun | None = None) -> None:
        where = None
        if c is not None:
            where = f"spec.{'initContainers' if c.init else 'containers'}{{{c.name}}}"
        record(self.cluster.store, pod, type_, reason, message, "kubelet", where)

    # --- the sync loop's step -----------------------------------------------------------------
    def sync(self, pod: Obj) -> None:
        for c in self.runs:
            if c.poll():
                self._on_exit(pod, c)
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            self._terminate(pod)
        elif not self._terminal():
            self._advance(pod)
            self._runtime_faults(pod)
        self.write_status(pod)

    def _terminal(self) -> bool:
        if self.pod_reason:
            return True
        if any(c.exit_code not in (None, 0) for c in self.inits):
            return True
        return all(c.exit_code is not None or c.never_started for c in self.apps)

    def _on_exit(self, pod: Obj, c: ContainerRun) -> None:
        self.kubelet.poke()

    def _advance(self, pod: Obj) -> None:
        if not self.volumes_ready:
            if time.monotonic() < self.next_volume_try:
                return
            try:
                for v in pod["spec"].get("volumes") or []:
                    podenv.setup_volume(self.cluster.store, pod, v, os.path.join(self.dir, "volumes", v["name"]))
            except podenv.ConfigError as e:
                if self.next_volume_try == 0.0 or time.monotonic() - self.next_volume_try > 10:
                    self.event(pod, "Warning", "FailedMount", str(e))
                self.next_volume_try = time.monotonic() + 1.0
                return
            self.volumes_ready = True
            self.kubelet.update_hosts(self.ns)
        for c in self.inits:
            if c.exit_code == 0:
                continue
            if c.proc is None:
                self._try_start(pod, c)
            return  # init containers run one at a time, in order
        for c in self.apps:
            if c.proc is None:
                self._try_start(pod, c)

    def _try_start(self, pod: Obj, c: ContainerRun) -> None:
        now = time.monotonic()
        if now < c.next_attempt:
            if c.waiting[0] == "ErrImagePull":
                c.waiting = ("ImagePullBackOff", f'Back-off pulling image "{c.spec.get("image")}"')
                self.event(pod, "Normal", "BackOff", c.waiting[1], c)
            return
        faults = self.cluster.faults
        image_ref = str(c.spec.get("image", ""))
        fault = faults.for_pod(pod, ("ErrImagePull", "InvalidImageName", "CreateContainerConfigError"))
        if fault is not None and (fault.container or (self.apps[0].name if self.apps else "")) != c.name:
            fault = None
        fmt = {"image": image_ref, "namespace": self.ns, "container": c.name, "pod": self.name}
        try:
            if fault is not None and fault.kind != "CreateContainerConfigError":
                raise PullError(fault.kind, fault.text(**fmt))
            if c.pull_failures == 0 and c.waiting[0] in ("ContainerCreating", "PodInitializing"):
                self.event(pod, "Normal", "Pulling", f'Pulling image "{image_ref}"', c)
            image = self.kubelet.images.resolve(image_ref)
        except PullError as e:
            c.waiting = (e.reason, e.message)
            c.pull_failures += 1
            c.next_attempt = now + min(10.0, 0.5 * 2 ** min(c.pull_failures, 5)) * self.kubelet.backoff_scale
            self.event(pod, "Warning", "Failed", f'Failed to pull image "{image_ref}": {e.message}', c)
            self.event(pod, "Warning", "Failed", f"Error: {e.reason}", c)
            return
        if c.pull_failures == 0 and not c.image_id:
            self.event(pod, "Normal", "Pulled", f'Successfully pulled image "{image_ref}" in 1ms (1ms including waiting)', c)
        c.image_id = f"docker.io/{image_ref}@sha256:{'0' * 64}"
        try:
            if fault is not None:
                raise podenv.ConfigError(fault.text(**fmt))
            env = podenv.container_env(self.cluster.store, pod, c.spec, self.base_env(pod))
        except podenv.ConfigError as e:
            if c.waiting != ("CreateContainerConfigError", str(e)):
                self.event(pod, "Warning", "Failed", f"Error: {e}", c)
            c.waiting = ("CreateContainerConfigError", str(e))
            c.next_attempt = now + 1.0 * self.kubelet.backoff_scale
            return
        command = [podenv.expand(a, env) for a in c.spec.get("command") or []]
        args = [podenv.expand(a, env) for a in c.spec["args"]] if "args" in c.spec else None
        argv = self.kubelet.images.argv(image, command, args)
        if not argv:
            c.waiting = ("CreateContainerError", "failed to generate container spec: no command specified")
            c.next_attempt = now + 5.0
            return
        c.start(self.sandbox_spec(pod, c, argv, env), python_for_sandbox(), self.kubelet.poke)
        self.event(pod, "Normal", "Created", f"Created container {c.name}", c)
        self.event(pod, "Normal", "Started", f"Started container {c.name}", c)

    def base_env(self, pod: Obj) -> dict[str, str]:
        port = self.cluster.port
        return {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOSTNAME": self.hostname, "HOME": "/",
                "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(port),
                "KUBERNETES_PORT": f"tcp://127.0.0.1:{port}"}

    def sandbox_spec(self, pod: Obj, c: ContainerRun, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
        psc = pod["spec"].get("securityContext") or {}
        csc = c.spec.get("securityContext") or {}
        uid = csc.get("runAsUser", psc.get("runAsUser")) if self.kubelet.run_as_user else None
        gid = csc.get("runAsGroup", psc.get("runAsGroup"))
        groups = [g for g in [psc.get("fsGroup"), *(psc.get("supplementalGroups") or [])] if g is not None]
        mounts = []
        for m in c.spec.get("volumeMounts") or []:
            source = os.path.join(self.dir, "volumes", m["name"])
            if m.get("subPath"):
                source = os.path.join(source, m["subPath"])
                os.makedirs(source, exist_ok=True)
            mounts.append({"source": os.path.realpath(source), "target": m["mountPath"], "read_only": bool(m.get("readOnly"))})
        mounts.append({"source": c.term_file, "target": c.spec.get("terminationMessagePath") or "/dev/termination-log"})
        tmp = os.path.join(c.dir, "tmp")
        os.makedirs(tmp, exist_ok=True)
        os.chmod(tmp, 0o1777)
        return {"root": os.path.join(c.dir, "rootfs"), "tmp": tmp, "argv": argv, "env": env,
                "workdir": c.spec.get("workingDir") or "/", "hostname": self.hostname, "hosts": self.hosts_file,
                "uid": uid, "gid": gid, "groups": groups, "mounts": mounts,
                "read_only_root": bool(csc.get("readOnlyRootFilesystem")) and self.kubelet.read_only_root}

    def _runtime_faults(self, pod: Obj) -> None:
        if self.runtime_fault_done:
            return
        fault = self.cluster.faults.for_pod(pod, _RUNTIME_FAULTS)
        if fault is None:
            return
        target = next((c for c in self.apps if c.name == (fault.container or self.apps[0].name)), None)
        if target is None or not target.running or time.monotonic() - target.started_mono < fault.after_s:
            return
        self.runtime_fault_done = True
        fmt = {"container": target.name, "namespace": self.ns, "pod": self.name, "image": str(target.spec.get("image"))}
        if fault.kind == "OOMKilled":
            target.kill("OOMKilled")
            return
        self.disruption = (_DISRUPTION_REASON[fault.kind], fault.text(**fmt))
        if fault.kind == "Evicted":
            self.pod_reason, self.pod_message = "Evicted", fault.text(**fmt)
            self.event(pod, "Warning", "Evicted", self.pod_message)
            for c in self.runs:
                c.kill()
                if c.proc is None:
                    c.never_started = True
            return
        self.write_status(pod)
        if fault.kind == "Preempted":
            record(self.cluster.store, pod, "Normal", "Preempted", "Preempted by pod on node " + NODE, "default-scheduler")
        try:
            self.cluster.store.delete(self.cluster.kind("pods"), self.ns, self.name)
        except ApiStatusError:
            pass

    def _terminate(self, pod: Obj) -> None:
        meta = pod["metadata"]
        grace = float(meta.get("deletionGracePeriodSeconds") or 0)
        deadline = time.monotonic() + grace
        if self.kill_at is None:
            for c in self.runs:
                if c.running:
                    self.event(pod, "Normal", "Killing", f"Stopping container {c.name}", c)
                    c.signal(signal.SIGTERM)
                elif c.proc is None:
                    c.never_started = True
            self.kill_at = deadline
        elif deadline < self.kill_at:
            self.kill_at = deadline
        if time.monotonic() >= self.kill_at:
            for c in self.runs:
                c.kill()
        for c in self.runs:
            if c.poll():
                self._on_exit(pod, c)
        if any(c.running for c in self.runs):
            return
        self.write_status(pod)
        try:
            self.cluster.store.delete(self.cluster.kind("pods"), self.ns, self.name, grace=0)
        except ApiStatusError:
            pass

    # --- status ---------------------------------------------------------------------------------
    def _phase(self) -> str:
        if self.pod_reason:
            return "Failed"
        if any(c.exit_code not in (None, 0) for c in self.inits):
            return "Failed"
        if self.apps and all(c.exit_code is not None or c.never_started for c in self.apps):
            return "Succeeded" if all(c.exit_code == 0 for c in self.apps) else "Failed"
        if any(c.proc is not None for c in self.apps):
            return "Running"
        return "Pending"

    def _condition(self, type_: str, ok: bool, reason: str = "", message: str = "") -> dict[str, Any]:
        status = "True" if ok else "False"
        prev = self.transitions.get(type_)
        if prev is None or prev[0] != status:
            self.transitions[type_] = (status, now_iso())
        cond: dict[str, Any] = {"type": type_, "status": status, "lastProbeTime": None,
                                "lastTransitionTime": self.transitions[type_][1]}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        return cond

    def write_status(self, pod: Obj) -> None:
        phase = self._phase()
        done = phase in ("Succeeded", "Failed")
        inits_done = all(c.exit_code == 0 for c in self.inits)
        unready = [c.name for c in self.apps if not c.running]
        ready = not unready and not done
        conds = [self._condition("PodReadyToStartContainers", self.volumes_ready),
                 self._condition("Initialized", inits_done, "" if inits_done else "ContainersNotInitialized",
                                 "" if inits_done else f"containers with incomplete status: {[c.name for c in self.inits if c.exit_code != 0]}".replace("'", "")),
                 self._condition("Ready", ready, "" if ready else ("PodCompleted" if done else "ContainersNotReady"),
                                 "" if ready or done else f"containers with unready status: [{' '.join(unready)}]"),
                 self._condition("ContainersReady", ready, "" if ready else ("PodCompleted" if done else "ContainersNotReady"),
                                 "" if ready or done else f"containers with unready status: [{' '.join(unready)}]")]
        if self.disruption:
            conds.insert(0, self._condition("DisruptionTarget", True, *self.disruption))
        status: dict[str, Any] = {"phase": phase, "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
                                  "podIP": self.pod_ip, "podIPs": [{"ip": self.pod_ip}], "startTime": self.start_time,
                                  "containerStatuses": [c.status(str(c.spec.get("image"))) for c in self.apps],
                                  "qosClass": _qos(pod)}
        if self.inits:
            status["initContainerStatuses"] = [c.status(str(c.spec.get("image"))) for c in self.inits]
        if self.pod_reason:
            status["reason"], status["message"] = self.pod_reason, self.pod_message

        def apply(o: Obj) -> None:
            if o["metadata"].get("uid") != self.uid:
                return
            mine = {c["type"] for c in conds}
            kept = [c for c in (o.get("status") or {}).get("conditions") or [] if c.get("type") not in mine]
            o["status"] = {**status, "conditions": [*kept, *conds]}
        self.cluster.store.mutate("pods", self.ns, self.name, apply)

    def stop(self) -> None:
        for c in self.runs:
            c.kill()
        for c in self.runs:
            if c.proc is not None:
                try:
                    c.proc.wait(timeout=5)
                except Exception:
                    pass
                c.poll()
        shutil.rmtree(self.dir, ignore_errors=True)


def _qos(pod: Obj) -> str:
    cs = (pod.get("spec") or {}).get("containers") or []
    res = [c.get("resources") or {} for c in cs]
    if not any(r.get("requests") or r.get("limits") for r in res):
        return "BestEffort"
    for r in res:
        lim, req = r.get("limits") or {}, {**(r.get("limits") or {}), **(r.get("requests") or {})}
        if not lim.get("cpu") or not lim.get("memory") or req.get("cpu") != lim.get("cpu") or req.get("memory") != lim.get("memory"):
            return "Burstable"
    return "Guaranteed"


class Kubelet:
    def __init__(self, cluster: FakeCluster, root: str, *, run_as_user: bool = True, read_only_root: bool = True,
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

    def poke(self) -> None:
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
