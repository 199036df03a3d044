"""The control plane's other loops: the scheduler (one fake node with capacity, labels and
taints; Unschedulable with the scheduler's message when a pod does not fit, or when a fault
says so) and the garbage collector (``ownerReferences``: dependents of a deleted owner are
deleted; ``foregroundDeletion`` waits for the ``blockOwnerDeletion`` dependents, ``orphan``
strips the references)."""

from __future__ import annotations

import contextlib
import functools
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from murphy.runtimes.kubernetes_fake.errors import ApiStatusError
from murphy.runtimes.kubernetes_fake.kinds import BY_KEY
from murphy.runtimes.kubernetes_fake.quantity import parse_quantity, pod_requests
from murphy.runtimes.kubernetes_fake.recorder import NODE, record
from murphy.runtimes.kubernetes_fake.store import FOREGROUND, ORPHAN, Obj, now_iso

if TYPE_CHECKING:
    from murphy.runtimes.kubernetes_fake.cluster import FakeCluster

DEFAULT_CAPACITY = {"cpu": "64", "memory": "256Gi", "pods": "110", "ephemeral-storage": "500Gi"}
_POSTSCRIPT = " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."


def node_object(capacity: dict[str, str], labels: dict[str, str], taints: list[dict[str, Any]]) -> Obj:
    return {"metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64", **labels}},
            "spec": {"taints": taints} if taints else {},
            "status": {"capacity": dict(capacity), "allocatable": dict(capacity),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status", "lastHeartbeatTime": now_iso(),
                                       "lastTransitionTime": now_iso()}],
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": NODE}],
                       "nodeInfo": {"kubeletVersion": "v1.31.0-murphy-fake", "containerRuntimeVersion": "murphy-fake://1",
                                    "operatingSystem": "linux", "architecture": "amd64"}}}


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


class Scheduler:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster, self.store = cluster, cluster.store
        self._last_message: dict[str, str] = {}

    def why_not(self, pod: Obj, used: dict[str, Fraction]) -> str | None:
        node = self.store.find("nodes", None, NODE) or {}
        spec = pod.get("spec") or {}
        labels = (node.get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
            return ("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes "
                    "are available: 1 Preemption is not helpful for scheduling.")
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(spec.get("tolerations") or [], taint):
                return (f"0/1 nodes are available: 1 node(s) had untolerated taint {{{taint.get('key')}: "
                        f"{taint.get('value', '')}}}. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
        allocatable = {k: parse_quantity(v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()}
        short = []
        want = pod_requests(pod)
        want["pods"] = Fraction(1)
        for res, q in sorted(want.items()):
            if q > 0 and used.get(res, Fraction(0)) + q > allocatable.get(res, Fraction(0)):
                short.append(f"1 Insufficient {res}" if res != "pods" else "1 Too many pods")
        if short:
            return f"0/1 nodes are available: {', '.join(short)}.{_POSTSCRIPT}"
        return None

    def sync_all(self) -> None:
        pods = list(self.store.iter_all("pods"))
        used: dict[str, Fraction] = {}
        for p in pods:
            if (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                for k, v in {**pod_requests(p), "pods": Fraction(1)}.items():
                    used[k] = used.get(k, Fraction(0)) + v
        for pod in pods:
            meta, spec = pod["metadata"], pod.get("spec") or {}
            if spec.get("nodeName") or meta.get("deletionTimestamp"):
                continue
            fault = self.cluster.faults.for_pod(pod, ("Unschedulable",))
            try:
                message = fault.text() if fault is not None else self.why_not(pod, used)
            except ValueError as e:
                message = f"0/1 nodes are available: {e}."
            if message is None:
                for k, v in {**pod_requests(pod), "pods": Fraction(1)}.items():
                    used[k] = used.get(k, Fraction(0)) + v
                self._bind(pod)
            elif self._last_message.get(meta["uid"]) != message:
                self._last_message[meta["uid"]] = message
                self._condition(pod, "False", "Unschedulable", message)
                record(self.store, pod, "Warning", "FailedScheduling", message, "default-scheduler")

    def _condition(self, pod: Obj, status: str, reason: str, message: str) -> None:
        uid = pod["metadata"]["uid"]

        def apply(o: Obj) -> None:
            if o["metadata"]["uid"] != uid:
                return
            st = o.setdefault("status", {})
            st.setdefault("phase", "Pending")
            st.setdefault("qosClass", "BestEffort")
            cond: dict[str, Any] = {"type": "PodScheduled", "status": status, "lastProbeTime": None,
                                    "lastTransitionTime": now_iso()}
            if reason:
                cond.update(reason=reason, message=message)
            st["conditions"] = [*[c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"], cond]
        self.store.mutate("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], apply)

    def _bind(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        self._last_message.pop(uid, None)

        def apply(o: Obj) -> None:
            if o["metadata"]["uid"] == uid:
                o["spec"]["nodeName"] = NODE
        self.store.mutate("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], apply)
        self._condition(pod, "True", "", "")
        record(self.store, pod, "Normal", "Scheduled",
               f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {NODE}", "default-scheduler")


class GarbageCollector:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster, self.store = cluster, cluster.store

    def sync_all(self) -> None:
        everything = self.store.metadata()
        by_uid = {o["metadata"]["uid"]: o for _, o in everything}
        dependents: dict[str, list[tuple[str, Obj, dict[str, Any]]]] = {}
        for key, o in everything:
            for ref in o["metadata"].get("ownerReferences") or []:
                dependents.setdefault(ref.get("uid", ""), []).append((key, o, ref))
        for key, o in everything:
            with contextlib.suppress(ApiStatusError):  # gone meanwhile: the next round sees it
                self._sync_one(key, o, by_uid, dependents)

    def _sync_one(self, key: str, o: Obj, by_uid: dict[str, Obj],
                  dependents: dict[str, list[tuple[str, Obj, dict[str, Any]]]]) -> None:
        meta = o["metadata"]
        ns, name, uid = meta.get("namespace"), meta["name"], meta["uid"]
        fins = meta.get("finalizers") or []
        if meta.get("deletionTimestamp") and ORPHAN in fins:
            for dkey, d, _ in dependents.get(uid, []):
                self.store.mutate(dkey, d["metadata"].get("namespace"), d["metadata"]["name"],
                                  functools.partial(_drop_owner, uid=uid))
            self.store.remove_finalizer(key, ns, name, ORPHAN)
            return
        if meta.get("deletionTimestamp") and FOREGROUND in fins:
            blocking = False
            for dkey, d, ref in dependents.get(uid, []):
                if not d["metadata"].get("deletionTimestamp"):
                    policy = "Foreground" if dependents.get(d["metadata"]["uid"]) else "Background"
                    self.store.delete(BY_KEY[dkey], d["metadata"].get("namespace"), d["metadata"]["name"], propagation=policy)
                if ref.get("blockOwnerDeletion"):
                    blocking = True
            if not blocking:
                self.store.remove_finalizer(key, ns, name, FOREGROUND)
            return
        refs = meta.get("ownerReferences") or []
        if not refs or meta.get("deletionTimestamp"):
            return
        owners = [by_uid.get(r.get("uid", "")) for r in refs]
        if any(ow is not None and not ow["metadata"].get("deletionTimestamp") for ow in owners):
            return  # a solid owner keeps it
        if all(ow is None for ow in owners):
            self.store.delete(BY_KEY[key], ns, name, propagation="Background")
        # otherwise an owner is being deleted: its own foreground/orphan handling decides


def _drop_owner(o: Obj, uid: str) -> None:
    refs = [r for r in o["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
    if refs:
        o["metadata"]["ownerReferences"] = refs
    else:
        o["metadata"].pop("ownerReferences", None)
