"""One pod on the fake kubelet (:mod:`.kubelet`): its volumes, its containers started in order
(init containers one by one, then the app containers), its deletion (SIGTERM, SIGKILL after the
grace period) and runtime faults, and the status the kubelet reports for it."""


from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from typing import TYPE_CHECKING, Any

from murphy.runtimes.kubernetes_fake import podenv
from murphy.runtimes.kubernetes_fake.containers import ContainerRun, python_for_sandbox
from murphy.runtimes.kubernetes_fake.errors import ApiStatusError
from murphy.runtimes.kubernetes_fake.images import PullError
from murphy.runtimes.kubernetes_fake.recorder import NODE, record
from murphy.runtimes.kubernetes_fake.store import Obj, now_iso

if TYPE_CHECKING:
    from murphy.runtimes.kubernetes_fake.kubelet import Kubelet

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
        self.sidecar_kill_at: float | None = None
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
        else:
            self._stop_sidecars(pod)
        self.write_status(pod)

    def _terminal(self) -> bool:
        if self.pod_reason:
            return True
        if any(c.exit_code not in (None, 0) for c in self.inits if not c.sidecar):
            return True
        return all(c.exit_code is not None or c.never_started for c in self.apps)

    def _stop_sidecars(self, pod: Obj) -> None:
        """The app containers are done: SIGTERM the native sidecars, last first (SIGKILL after the
        grace period), as the kubelet does since 1.29."""
        running = [c for c in self.inits if c.sidecar and c.running]
        if not running:
            return
        if self.sidecar_kill_at is None:
            for c in reversed(running):
                self.event(pod, "Normal", "Killing", f"Stopping container {c.name}", c)
                c.signal(signal.SIGTERM)
            self.sidecar_kill_at = time.monotonic() + float(pod["spec"].get("terminationGracePeriodSeconds", 30))
        elif time.monotonic() >= self.sidecar_kill_at:
            for c in running:
                c.kill()

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
            if c.exit_code == 0 or (c.sidecar and c.proc is not None):
                continue  # done, or a sidecar that started: the next one may start
            if c.proc is None:
                self._try_start(pod, c)
                if c.sidecar and c.proc is not None:
                    continue
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
            python = image.python or self.kubelet.images.python
            env = podenv.container_env(self.cluster.store, pod, c.spec, self.base_env(pod, python))
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
        c.start(self.sandbox_spec(pod, c, argv, env), python_for_sandbox(), self.kubelet.on_output)
        self.event(pod, "Normal", "Created", f"Created container {c.name}", c)
        self.event(pod, "Normal", "Started", f"Started container {c.name}", c)

    def base_env(self, pod: Obj, python: str) -> dict[str, str]:
        port = self.cluster.port
        # The image's Python comes first on PATH, as in murphy's images (/opt/murphy/bin).
        path = os.pathsep.join([os.path.dirname(python), os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")])
        return {"PATH": path, "HOSTNAME": self.hostname, "HOME": "/",
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
        with contextlib.suppress(ApiStatusError):
            self.cluster.store.delete(self.cluster.kind("pods"), self.ns, self.name)

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
        with contextlib.suppress(ApiStatusError):
            self.cluster.store.delete(self.cluster.kind("pods"), self.ns, self.name, grace=0)

    # --- status ---------------------------------------------------------------------------------
    def _phase(self) -> str:
        if self.pod_reason:
            return "Failed"
        if any(c.exit_code not in (None, 0) for c in self.inits if not c.sidecar):
            return "Failed"
        if any(c.sidecar and c.running for c in self.inits) and self.apps and all(
                c.exit_code is not None or c.never_started for c in self.apps):
            return "Running"  # finished only once its sidecars have stopped
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
        inits_done = all(c.exit_code == 0 or (c.sidecar and c.proc is not None) for c in self.inits)
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
                with contextlib.suppress(Exception):
                    c.proc.wait(timeout=5)
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
