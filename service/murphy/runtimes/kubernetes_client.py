"""The Kubernetes API as the runtime uses it: a few calls on plain JSON objects (no client library
here). :mod:`murphy.runtimes.kubernetes_lightkube` is the real one (``lightkube``, the only
module that imports it); :class:`FakeKubeApi` below is an in-memory one for unit tests.

Keeping the surface small (create, get, list by labels/fields, merge-patch of annotations, delete
with a propagation policy, pod logs) keeps both the adapter and every fake of it faithful. Every
error of the client library becomes one of the exceptions below (``KubernetesError`` and its
subclasses, all :class:`~murphy.exceptions.RuntimeBackendError`), in one place: the adapter's
``map_error``. A 404 is not an error for ``get``/``patch_annotations``/``delete``: they answer
``None``/``False``.
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from murphy.exceptions import RuntimeBackendError

Obj = dict[str, Any]
KINDS = ("ConfigMap", "Secret", "Service", "Job", "Pod", "Event")


class KubernetesError(RuntimeBackendError):
    """The API server refused a request, or could not be reached (``status`` None)."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "", retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        #: Worth another try on the next pass (429, 5xx, a connection error).
        self.retryable = retryable


class KubernetesConflict(KubernetesError):
    """409: an object of that name exists already (create), or a conflicting write."""


class KubernetesNotFound(KubernetesError):
    """404 where the caller needed the object (a pod's log)."""


class KubernetesConfigError(KubernetesError):
    """No usable kubeconfig / in-cluster service account."""


class KubeApi(Protocol):
    """What the runtime asks of the API server, all in one namespace."""

    namespace: str
    #: Requests sent so far (the benchmark's request-rate figure).
    requests: int

    def create(self, obj: Obj) -> Obj: ...

    def get(self, kind: str, name: str) -> Obj | None: ...

    def list(self, kind: str, *, labels: Mapping[str, str] | None = None,
             fields: Mapping[str, str] | None = None) -> list[Obj]: ...

    def patch_annotations(self, kind: str, name: str, annotations: Mapping[str, str]) -> Obj | None: ...

    def delete(self, kind: str, name: str, *, propagation: str = "Foreground", grace_s: int | None = None) -> bool: ...

    def pod_log(self, pod: str, container: str, *, since_time: str | None = None,
                follow: bool = False) -> Iterator[str]:
        """Lines (``timestamps=true``: each starts with an RFC 3339 timestamp and a space)."""
        ...

    def close(self) -> None: ...


def _now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _matches(obj: Obj, labels: Mapping[str, str] | None, fields: Mapping[str, str] | None) -> bool:
    have = obj.get("metadata", {}).get("labels") or {}
    if labels and any(have.get(k) != v for k, v in labels.items()):
        return False
    for path, want in (fields or {}).items():
        cur: Any = obj
        for part in path.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur != want:
            return False
    return True


class FakeKubeApi:
    """An in-memory :class:`KubeApi` for unit tests: objects are stored as given (uid,
    creationTimestamp and resourceVersion added), deletes honour the propagation policy by
    removing objects whose ownerReferences name the deleted uid (or, for a Job, its pods), and
    ``Foreground`` leaves the object with a ``deletionTimestamp`` until :meth:`finish_deletes`.
    Pod status and logs are set by the test (``objects``, ``logs``). Requests are recorded."""

    def __init__(self, namespace: str = "murphy-jobs") -> None:
        self.namespace = namespace
        self.requests = 0
        self.calls: list[tuple[str, str, str, dict[str, Any]]] = []
        self.objects: dict[tuple[str, str], Obj] = {}
        #: (pod, container) -> timestamped lines the log endpoint serves.
        self.logs: dict[tuple[str, str], list[str]] = {}
        #: Set to make every call raise it (an unreachable or refusing server).
        self.fail_with: KubernetesError | None = None
        #: Foreground deletes complete at once (no pods to wait for) unless False.
        self.instant_deletes = True
        self._rv = itertools.count(1)
        self._lock = threading.Lock()

    def _call(self, verb: str, kind: str, name: str = "", **kw: Any) -> None:
        self.requests += 1
        self.calls.append((verb, kind, name, kw))
        if self.fail_with is not None:
            raise self.fail_with

    def create(self, obj: Obj) -> Obj:
        kind, name = obj["kind"], obj["metadata"]["name"]
        self._call("create", kind, name)
        with self._lock:
            if (kind, name) in self.objects:
                raise KubernetesConflict(f'{kind.lower()}s "{name}" already exists', status=409, reason="AlreadyExists")
            stored = copy.deepcopy(obj)
            meta = stored["metadata"]
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now_rfc3339(), resourceVersion=str(next(self._rv)),
                        namespace=self.namespace)
            if kind == "Secret" and "stringData" in stored:
                stored["data"] = stored.pop("stringData")  # (not base64: the fake keeps it readable)
            self.objects[(kind, name)] = stored
            return copy.deepcopy(stored)

    def get(self, kind: str, name: str) -> Obj | None:
        self._call("get", kind, name)
        obj = self.objects.get((kind, name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, kind: str, *, labels: Mapping[str, str] | None = None,
             fields: Mapping[str, str] | None = None) -> list[Obj]:
        self._call("list", kind, labels=dict(labels or {}), fields=dict(fields or {}))
        with self._lock:
            return [copy.deepcopy(o) for (k, _), o in sorted(self.objects.items()) if k == kind and _matches(o, labels, fields)]

    def patch_annotations(self, kind: str, name: str, annotations: Mapping[str, str]) -> Obj | None:
        self._call("patch", kind, name, annotations=dict(annotations))
        with self._lock:
            obj = self.objects.get((kind, name))
            if obj is None:
                return None
            obj["metadata"].setdefault("annotations", {}).update(annotations)
            return copy.deepcopy(obj)

    def delete(self, kind: str, name: str, *, propagation: str = "Foreground", grace_s: int | None = None) -> bool:
        self._call("delete", kind, name, propagation=propagation, grace_s=grace_s)
        with self._lock:
            obj = self.objects.get((kind, name))
            if obj is None:
                return False
            if propagation == "Foreground" and not self.instant_deletes:
                obj["metadata"].setdefault("deletionTimestamp", _now_rfc3339())
                return True
            self._remove(kind, name, propagation)
            return True

    def _remove(self, kind: str, name: str, propagation: str) -> None:
        obj = self.objects.pop((kind, name), None)
        if obj is None or propagation == "Orphan":
            return
        uid = obj["metadata"]["uid"]
        for (k, n), o in list(self.objects.items()):
            owners = [r.get("uid") for r in o["metadata"].get("ownerReferences") or []]
            job_pod = kind == "Job" and k == "Pod" and (o["metadata"].get("labels") or {}).get("job-name") == name
            if uid in owners or job_pod:
                self._remove(k, n, propagation)

    def finish_deletes(self) -> None:
        """Complete every Foreground delete in progress (the garbage collector's work)."""
        with self._lock:
            for (k, n), o in list(self.objects.items()):
                if o["metadata"].get("deletionTimestamp") and (k, n) in self.objects:
                    self._remove(k, n, "Foreground")

    def pod_log(self, pod: str, container: str, *, since_time: str | None = None,
                follow: bool = False) -> Iterator[str]:
        self._call("log", "Pod", pod, container=container, since_time=since_time, follow=follow)
        if ("Pod", pod) not in self.objects:
            raise KubernetesNotFound(f'pods "{pod}" not found', status=404, reason="NotFound")
        lines = list(self.logs.get((pod, container), []))
        if since_time:
            lines = [ln for ln in lines if ln.split(" ", 1)[0][:19] >= since_time[:19]]
        return iter(lines)

    def close(self) -> None:
        pass
