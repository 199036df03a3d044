"""The fake API server's storage: objects by kind, namespace and name, one global
``resourceVersion`` counter, a bounded history of watch events, and deletion as the API server
does it (finalizers, ``deletionTimestamp``, graceful pod deletion, propagation policies).

Everything is plain JSON-like dicts, copied on the way in and out. One lock guards it all; the
controllers and the kubelet call the same methods the HTTP layer does (they are clients of the
API, as in Kubernetes), plus :meth:`Store.mutate` for status writes.
"""

from __future__ import annotations

import copy
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from murphy.runtimes.kubernetes_fake import admission, errors
from murphy.runtimes.kubernetes_fake.kinds import BY_KEY, Kind
from murphy.runtimes.kubernetes_fake.patch import APPLY, apply_patch

Obj = dict[str, Any]
_RANDOM_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # what the API server's generateName draws from
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def iso_at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Change:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    key: str
    obj: Obj
    old: Obj | None


class Store:
    def __init__(self, namespaces: tuple[str, ...] = ("default",), history: int = 10000) -> None:
        self.lock = threading.RLock()
        self._objs: dict[str, dict[tuple[str, str], Obj]] = {k: {} for k in BY_KEY}
        self._rv = 0
        #: In resourceVersion order (every write makes one version and one change), trimmed
        #: to ``history`` changes: a watch resumes by index, not by scanning.
        self._history: list[Change] = []
        self._history_limit = history
        #: Watches from a resourceVersion below this one get 410 Gone (their changes are forgotten).
        self.compacted_rv = 0
        self._listeners: list[Callable[[], None]] = []
        self._notified_rv = 0
        self._log_listeners: list[Callable[[], None]] = []
        for ns in ("default", "kube-system", *namespaces):
            if ("", ns) not in self._objs["namespaces"]:
                self.create(BY_KEY["namespaces"], None, {"metadata": {"name": ns}})

    # --- change notification -------------------------------------------------------------
    def subscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def subscribe_logs(self, listener: Callable[[], None]) -> None:
        """``listener()`` runs whenever a container writes to its log (the follow streams)."""
        self._log_listeners.append(listener)

    def notify_logs(self) -> None:
        for listener in list(self._log_listeners):
            listener()

    def notify(self) -> None:
        for listener in list(self._listeners):
            listener()

    def _notify_if_changed(self) -> None:
        """Wake the loops only when a write made a new version: a no-op status write must not
        wake the kubelet that made it (or it would spin)."""
        if self._rv != self._notified_rv:
            self._notified_rv = self._rv
            self.notify()

    @property
    def resource_version(self) -> int:
        return self._rv

    def _record(self, type_: str, key: str, obj: Obj, old: Obj | None) -> None:
        self._history.append(Change(self._rv, type_, key, copy.deepcopy(obj), old))
        if len(self._history) > self._history_limit + self._history_limit // 10:
            drop = len(self._history) - self._history_limit
            self.compacted_rv = self._history[drop - 1].rv
            del self._history[:drop]

    def compact(self) -> None:
        """Forget the watch history (as etcd compaction does): older resumes get 410 Gone."""
        with self.lock:
            self._history.clear()
            self.compacted_rv = self._rv

    def changes_since(self, rv: int, key: str) -> list[Change]:
        with self.lock:
            if rv < self.compacted_rv:
                raise errors.gone(f"too old resource version: {rv} ({self.compacted_rv + 1})")
            hist = self._history
            start = 0
            if hist:
                start = max(0, rv + 1 - hist[0].rv)
                if start > len(hist) or (start < len(hist) and hist[start].rv != rv + 1):
                    start = next((i for i, c in enumerate(hist) if c.rv > rv), len(hist))  # not consecutive
            return [c for c in hist[start:] if c.key == key]

    # --- reads ---------------------------------------------------------------------------
    def get(self, kind: Kind, ns: str | None, name: str) -> Obj:
        with self.lock:
            obj = self._objs[kind.key].get((ns or "", name))
            if obj is None:
                raise errors.not_found(kind.plural, kind.group, name)
            return copy.deepcopy(obj)

    def find(self, key: str, ns: str | None, name: str) -> Obj | None:
        with self.lock:
            obj = self._objs[key].get((ns or "", name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, kind: Kind, ns: str | None, match: Callable[[Obj], bool] = lambda o: True) -> tuple[list[Obj], int]:
        with self.lock:
            items = [copy.deepcopy(o) for (ons, _), o in sorted(self._objs[kind.key].items())
                     if (ns is None or ons == ns) and match(o)]
            return items, self._rv

    def iter_all(self, key: str) -> Iterator[Obj]:
        with self.lock:
            return iter([copy.deepcopy(o) for o in self._objs[key].values()])

    def metadata(self) -> Sequence[tuple[str, Obj]]:
        """``(key, object)`` of everything, with only ``metadata`` (copied): the garbage
        collector's view, cheap enough to take on every change."""
        with self.lock:
            return [(key, {"metadata": copy.deepcopy(o["metadata"])}) for key, objs in self._objs.items()
                    if key != "events" for o in objs.values()]

    def by_uid(self, uid: str) -> Obj | None:
        with self.lock:
            for objs in self._objs.values():
                for o in objs.values():
                    if o["metadata"].get("uid") == uid:
                        return o
            return None

    # --- writes --------------------------------------------------------------------------
    def _bump(self, obj: Obj) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)

    def _check_namespace(self, kind: Kind, ns: str | None) -> None:
        if kind.namespaced and ("", ns or "") not in self._objs["namespaces"]:
            raise errors.not_found("namespaces", "", ns or "")

    def _check_service_account(self, pod: Obj, ns: str) -> None:
        """The ServiceAccount admission plugin: a pod's service account must exist."""
        spec = pod.setdefault("spec", {})
        sa = spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
        spec["serviceAccount"] = sa
        if (ns, sa) not in self._objs["serviceaccounts"]:
            name = pod["metadata"].get("name") or pod["metadata"].get("generateName", "")
            raise errors.ApiStatusError(403, "Forbidden", f'pods "{name}" is forbidden: error looking up service account '
                                        f'{ns}/{sa}: serviceaccount "{sa}" not found', {"name": name, "kind": "pods"})

    def create(self, kind: Kind, ns: str | None, body: Obj, dry_run: bool = False) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        admission.check_namespace_of(meta.get("namespace"), ns)
        with self.lock:
            self._check_namespace(kind, ns)
            if kind.plural == "pods":  # admission sees the object before its name is generated
                self._check_service_account(obj, ns or "")
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + "".join(random.choices(_RANDOM_CHARS, k=5))
            if not meta.get("name"):
                raise errors.invalid(kind.kind, kind.group, "", [("metadata.name", "Required value: name or generateName is required")])
            if kind.namespaced:
                meta["namespace"] = ns
            obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
            uid = str(uuid.uuid4())
            if kind.plural == "jobs":
                admission.default_job(obj, uid)
            admission.admit(kind, obj, None)
            if (ns or "", meta["name"]) in self._objs[kind.key]:
                raise errors.already_exists(kind.plural, kind.group, meta["name"])
            for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
                meta.pop(k, None)
            meta.update(uid=uid, creationTimestamp=now_iso())
            if kind.plural in ("jobs", "pods", "services", "namespaces"):
                meta["generation"] = 1
            if kind.plural == "namespaces":
                obj["status"] = {"phase": "Active"}
                obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            if dry_run:
                return obj
            self._bump(obj)
            self._objs[kind.key][(ns or "", meta["name"])] = obj
            self._record("ADDED", kind.key, obj, None)
            out = copy.deepcopy(obj)
            if kind.plural == "namespaces":
                # The service account controller's work: every namespace has a "default" one.
                self.create(BY_KEY["serviceaccounts"], meta["name"], {"metadata": {"name": "default"}})
        self._notify_if_changed()
        return out

    def _write(self, kind: Kind, old: Obj, new: Obj, dry_run: bool = False) -> Obj:
        """Store ``new`` in place of ``old`` (same identity), or remove it when its deletion is done."""
        meta, old_meta = new["metadata"], old["metadata"]
        for k in ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if k in old_meta:
                meta[k] = old_meta[k]
            else:
                meta.pop(k, None)
        new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
        if "generation" in old_meta:
            meta["generation"] = old_meta["generation"] + (1 if new.get("spec") != old.get("spec") else 0)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if new == old or dry_run:
            return copy.deepcopy(new)
        key = (old_meta.get("namespace", ""), old_meta["name"])
        if self._deletion_done(kind, new):
            return self._remove(kind, key)
        self._bump(new)
        self._objs[kind.key][key] = new
        self._record("MODIFIED", kind.key, new, copy.deepcopy(old))
        return copy.deepcopy(new)

    @staticmethod
    def _deletion_done(kind: Kind, obj: Obj) -> bool:
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return False
        return kind.plural != "pods" or meta.get("deletionGracePeriodSeconds", 0) == 0

    def _remove(self, kind: Kind, key: tuple[str, str]) -> Obj:
        obj = self._objs[kind.key].pop(key)
        old = copy.deepcopy(obj)
        self._bump(obj)
        self._record("DELETED", kind.key, obj, old)
        if kind.plural == "namespaces":
            for k, objs in self._objs.items():
                for okey in [o for o in objs if o[0] == key[1]]:
                    self._remove(BY_KEY[k], okey)
        return copy.deepcopy(obj)

    def _current(self, kind: Kind, ns: str | None, name: str) -> Obj:
        obj = self._objs[kind.key].get((ns or "", name))
        if obj is None:
            raise errors.not_found(kind.plural, kind.group, name)
        return obj

    def replace(self, kind: Kind, ns: str | None, name: str, body: Obj, subresource: str | None = None,
                dry_run: bool = False) -> Obj:
        new = copy.deepcopy(body)
        new.setdefault("metadata", {})
        admission.check_namespace_of(new["metadata"].get("namespace"), ns)
        if new["metadata"].get("name") not in (None, name):
            raise errors.bad_request("the name of the object does not match the name on the URL")
        with self.lock:
            old = self._current(kind, ns, name)
            rv = new["metadata"].get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(kind.plural, kind.group, name, "the object has been modified; please apply "
                                      "your changes to the latest version and try again")
            new = self._scope(kind, old, new, subresource)
            if subresource != "status":
                admission.admit(kind, new, old)
            out = self._write(kind, old, new, dry_run)
        self._notify_if_changed()
        return out

    @staticmethod
    def _scope(kind: Kind, old: Obj, new: Obj, subresource: str | None) -> Obj:
        """A status write changes only ``status``; a main write never changes ``status``."""
        if "status" not in kind.subresources:
            return new
        if subresource == "status":
            return {**copy.deepcopy(old), "status": new.get("status", {})}
        out = dict(new)
        if "status" in old:
            out["status"] = copy.deepcopy(old["status"])
        else:
            out.pop("status", None)
        return out

    def patch(self, kind: Kind, ns: str | None, name: str, content_type: str, body: Any,
              subresource: str | None = None, dry_run: bool = False, force: bool = False) -> Obj:
        with self.lock:
            if content_type.startswith(APPLY) and (ns or "", name) not in self._objs[kind.key]:
                return self.create(kind, ns, {**body, "metadata": {**body.get("metadata", {}), "name": name}}, dry_run)
            old = self._current(kind, ns, name)
            new = apply_patch(content_type, copy.deepcopy(old), body)
            rv = new["metadata"].get("resourceVersion")
            if rv != old["metadata"]["resourceVersion"] and isinstance(body, dict) and (body.get("metadata") or {}).get("resourceVersion"):
                raise errors.conflict(kind.plural, kind.group, name, "the object has been modified; please apply "
                                      "your changes to the latest version and try again")
            new = self._scope(kind, old, new, subresource)
            if subresource != "status":
                admission.admit(kind, new, old)
            out = self._write(kind, old, new, dry_run)
        self._notify_if_changed()
        return out

    def mutate(self, key: str, ns: str | None, name: str, fn: Callable[[Obj], None]) -> Obj | None:
        """Controllers' writes: ``fn`` edits a copy of the object (status included); None if gone."""
        with self.lock:
            old = self._objs[key].get((ns or "", name))
            if old is None:
                return None
            new = copy.deepcopy(old)
            fn(new)
            out = self._write(BY_KEY[key], old, new)
        self._notify_if_changed()
        return out

    def delete(self, kind: Kind, ns: str | None, name: str, propagation: str | None = None,
               grace: int | None = None, preconditions: dict[str, Any] | None = None, dry_run: bool = False) -> Obj:
        """DELETE: immediate, or ``deletionTimestamp`` set while finalizers (``foregroundDeletion``,
        ``orphan``) or a pod's graceful termination hold the object."""
        with self.lock:
            obj = self._current(kind, ns, name)
            meta = obj["metadata"]
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise errors.conflict(kind.plural, kind.group, name, f"Precondition failed: UID in precondition: "
                                      f"{pre['uid']}, UID in object meta: {meta['uid']}")
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise errors.conflict(kind.plural, kind.group, name, "Precondition failed: resourceVersion mismatch")
            if dry_run:
                return copy.deepcopy(obj)
            if propagation is None:
                # batch/v1 Jobs deleted through the API orphan their pods unless told otherwise.
                propagation = "Orphan" if kind.plural == "jobs" else "Background"
            new = copy.deepcopy(obj)
            nmeta = new["metadata"]
            finalizers = list(nmeta.get("finalizers") or [])
            if propagation == "Foreground" and FOREGROUND not in finalizers:
                finalizers.append(FOREGROUND)
            if propagation == "Orphan" and ORPHAN not in finalizers and not meta.get("deletionTimestamp"):
                finalizers.append(ORPHAN)
            nmeta["finalizers"] = finalizers
            if not finalizers:
                nmeta.pop("finalizers")
            if kind.plural == "pods":
                spec = obj.get("spec") or {}
                g = spec.get("terminationGracePeriodSeconds", 30) if grace is None else max(0, grace)
                if not spec.get("nodeName"):
                    g = 0  # never scheduled: no kubelet has anything to stop
                current = meta.get("deletionGracePeriodSeconds")
                if current is None or g < current:
                    nmeta["deletionGracePeriodSeconds"] = g
                    nmeta["deletionTimestamp"] = iso_at(time.time() + g)
            elif not meta.get("deletionTimestamp"):
                nmeta["deletionTimestamp"] = now_iso()
                nmeta["deletionGracePeriodSeconds"] = 0
            key = (meta.get("namespace", ""), name)
            if self._deletion_done(kind, new):
                out = self._remove(kind, key)
            elif new == obj:
                return copy.deepcopy(obj)  # deleting already, nothing shortened: no new version
            else:
                # _write keeps identity fields from the old object: set deletion fields directly.
                self._bump(new)
                self._objs[kind.key][key] = new
                self._record("MODIFIED", kind.key, new, copy.deepcopy(obj))
                out = copy.deepcopy(new)
        self._notify_if_changed()
        return out

    def remove_finalizer(self, key: str, ns: str | None, name: str, finalizer: str) -> None:
        def drop(o: Obj) -> None:
            fins = [f for f in o["metadata"].get("finalizers") or [] if f != finalizer]
            if fins:
                o["metadata"]["finalizers"] = fins
            else:
                o["metadata"].pop("finalizers", None)
        self.mutate(key, ns, name, drop)
