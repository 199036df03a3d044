"""The resources this fake serves, and their discovery documents (``/api``, ``/apis``,
``/api/v1``, ``/apis/<group>/<version>``) as ``kubectl`` and lightkube read them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.0-murphy-fake", "gitCommit": "0" * 40,
           "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.22.0",
           "compiler": "gc", "platform": "linux/amd64"}


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    #: Objects live in the store under this key: ``events.k8s.io`` Events are core Events.
    storage: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        return self.storage or self.plural

    @property
    def singular(self) -> str:
        return self.kind.lower()


KINDS: tuple[Kind, ...] = (
    Kind("", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",), subresources=("status",)),
    Kind("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    Kind("", "v1", "secrets", "Secret"),
    Kind("", "v1", "services", "Service", short_names=("svc",), subresources=("status",)),
    Kind("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
    Kind("", "v1", "pods", "Pod", short_names=("po",), subresources=("status", "log")),
    Kind("", "v1", "events", "Event", short_names=("ev",)),
    Kind("", "v1", "nodes", "Node", namespaced=False, short_names=("no",), subresources=("status",)),
    Kind("batch", "v1", "jobs", "Job", subresources=("status",)),
    Kind("events.k8s.io", "v1", "events", "Event", short_names=("ev",), storage="events"),
)
BY_PATH: dict[tuple[str, str, str], Kind] = {(k.group, k.version, k.plural): k for k in KINDS}
BY_KEY: dict[str, Kind] = {k.key: k for k in KINDS if not k.storage}
GROUPS = ("batch", "events.k8s.io")


def kind_for(group: str, version: str, plural: str) -> Kind | None:
    return BY_PATH.get((group, version, plural))


def resource_list(group: str, version: str) -> dict[str, Any] | None:
    kinds = [k for k in KINDS if k.group == group and k.version == version]
    if not kinds:
        return None
    resources: list[dict[str, Any]] = []
    for k in kinds:
        resources.append({"name": k.plural, "singularName": k.singular, "namespaced": k.namespaced, "kind": k.kind,
                          "verbs": VERBS, "shortNames": list(k.short_names),
                          "storageVersionHash": f"murphy-{k.plural}"})
        for sub in k.subresources:
            resources.append({"name": f"{k.plural}/{sub}", "singularName": "", "namespaced": k.namespaced,
                              "kind": "Pod" if sub == "log" else k.kind,
                              "verbs": ["get"] if sub == "log" else ["get", "patch", "update"]})
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


def api_versions() -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}


def api_groups() -> dict[str, Any]:
    groups = []
    for g in GROUPS:
        gv = {"groupVersion": f"{g}/v1", "version": "v1"}
        groups.append({"name": g, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group: str) -> dict[str, Any] | None:
    if group not in GROUPS:
        return None
    gv = {"groupVersion": f"{group}/v1", "version": "v1"}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv], "preferredVersion": gv}
