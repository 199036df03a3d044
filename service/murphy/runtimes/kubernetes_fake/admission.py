"""What the API server does to an object before storing it: defaulting and validation (422
Invalid with the server's messages), for the kinds and fields murphy's objects use."""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Mapping
from typing import Any

from murphy.runtimes.kubernetes_fake.errors import ApiStatusError, invalid
from murphy.runtimes.kubernetes_fake.kinds import Kind

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
#: Kinds whose names must be DNS-1123 labels (the rest: DNS-1123 subdomains).
_LABEL_NAMED = {"services", "namespaces"}
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
Causes = list[tuple[str, str]]


def _check_name(kind: Kind, name: str, causes: Causes) -> None:
    pattern, limit = (_LABEL, 63) if kind.plural in _LABEL_NAMED else (_SUBDOMAIN, 253)
    if len(name) > limit:
        causes.append(("metadata.name", f'Invalid value: "{name}": must be no more than {limit} characters'))
    elif not pattern.match(name):
        causes.append(("metadata.name", f'Invalid value: "{name}": a lowercase RFC 1123 '
                       f'{"label" if limit == 63 else "subdomain"} must consist of lower case alphanumeric '
                       "characters, '-' or '.', and must start and end with an alphanumeric character"))


def check_labels(labels: Mapping[str, Any], where: str, causes: Causes) -> None:
    for key, value in labels.items():
        name = key.rsplit("/", 1)[-1]
        if not isinstance(key, str) or not _QUALIFIED.match(name) or len(name) > 63:
            causes.append((where, f'Invalid value: "{key}": name part must consist of alphanumeric characters, '
                           "'-', '_' or '.', and must start and end with an alphanumeric character"))
        if not isinstance(value, str):
            causes.append((where, f"Invalid value: {value!r}: label values must be strings"))
        elif len(value) > 63:
            causes.append((where, f'Invalid value: "{value}": must be no more than 63 characters'))
        elif not _LABEL_VALUE.match(value):
            causes.append((where, f'Invalid value: "{value}": a valid label must be an empty string or consist of '
                           "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"))


def _default_container(c: dict[str, Any]) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    image = str(c.get("image", ""))
    tag = image.rsplit("/", 1)[-1]
    c.setdefault("imagePullPolicy", "Always" if ":" not in tag or tag.endswith(":latest") else "IfNotPresent")
    c.setdefault("resources", {})


def default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for c in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        if isinstance(c, dict):
            _default_container(c)


def check_pod_spec(spec: Mapping[str, Any], where: str, causes: Causes) -> None:
    containers = spec.get("containers") or []
    if not containers:
        causes.append((f"{where}.containers", "Required value"))
    volumes = {v.get("name") for v in spec.get("volumes") or [] if isinstance(v, Mapping)}
    seen: set[str] = set()
    for field_name in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field_name) or []):
            at = f"{where}.{field_name}[{i}]"
            name = c.get("name", "")
            if not name:
                causes.append((f"{at}.name", "Required value"))
            elif not _LABEL.match(name) or len(name) > 63:
                causes.append((f"{at}.name", f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of '
                               "lower case alphanumeric characters or '-'"))
            elif name in seen:
                causes.append((f"{at}.name", f'Duplicate value: "{name}"'))
            seen.add(name)
            if not c.get("image"):
                causes.append((f"{at}.image", "Required value"))
            for j, m in enumerate(c.get("volumeMounts") or []):
                if m.get("name") not in volumes:
                    causes.append((f"{at}.volumeMounts[{j}].name", f'Not found: "{m.get("name")}"'))


def _check_job(obj: dict[str, Any], old: Mapping[str, Any] | None, causes: Causes) -> None:
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    pod = template.get("spec") or {}
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        causes.append(("spec.template.spec.restartPolicy", 'Required value: valid values: "OnFailure", "Never"'))
    check_pod_spec(pod, "spec.template.spec", causes)
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        causes.append(("spec.completions", "Required value: when completion mode is Indexed"))
    check_labels((template.get("metadata") or {}).get("labels") or {}, "spec.template.metadata.labels", causes)
    if old is not None:
        old_spec = old.get("spec") or {}
        for key in ("template", "selector", "completionMode", "podFailurePolicy"):
            if spec.get(key) != old_spec.get(key):
                causes.append((f"spec.{key}", "Invalid value: field is immutable"))


def default_job(obj: dict[str, Any], uid: str) -> None:
    """The batch/v1 Job defaults, and the selector and labels the API server generates."""
    spec = obj.setdefault("spec", {})
    meta = obj["metadata"]
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("manualSelector", False)
    spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    labels = tmeta.setdefault("labels", {})
    if not spec["manualSelector"]:
        labels.update({JOB_UID_LABEL: uid, JOB_NAME_LABEL: meta["name"], "controller-uid": uid, "job-name": meta["name"]})
        spec.setdefault("selector", {"matchLabels": {JOB_UID_LABEL: uid}})
    default_pod_spec(template.setdefault("spec", {}))


def _secret_data(obj: dict[str, Any], causes: Causes) -> None:
    data = obj.setdefault("data", {}) if ("data" in obj or "stringData" in obj) else None
    if data is None:
        return
    for k, v in (obj.pop("stringData", None) or {}).items():
        data[k] = base64.b64encode(str(v).encode()).decode()
    for k, v in data.items():
        try:
            base64.b64decode(v, validate=True)
        except (ValueError, TypeError):
            causes.append((f"data[{k}]", "Invalid value: illegal base64 data"))


def admit(kind: Kind, obj: dict[str, Any], old: Mapping[str, Any] | None) -> None:
    """Default and validate ``obj`` (in place); raises 422 Invalid with every cause."""
    causes: Causes = []
    meta = obj["metadata"]
    name = meta.get("name", "")
    _check_name(kind, name, causes)
    check_labels(meta.get("labels") or {}, "metadata.labels", causes)
    if kind.plural == "secrets":
        _secret_data(obj, causes)
        obj.setdefault("type", "Opaque")
    if kind.plural in ("configmaps", "secrets") and old is not None and old.get("immutable"):
        for key in ("data", "binaryData", "immutable"):
            if obj.get(key) != old.get(key):
                causes.append((key, "Forbidden: field is immutable when `immutable` is set"))
    if kind.plural == "jobs":
        if len(name) > 63:
            causes.append(("spec.template.labels", f'Invalid value: "{name}": must be no more than 63 characters'))
        _check_job(obj, old, causes)
    if kind.plural == "pods":
        default_pod_spec(obj.setdefault("spec", {}))
        check_pod_spec(obj["spec"], "spec", causes)
        if old is not None and _pod_spec_changed(old.get("spec") or {}, obj["spec"]):
            causes.append(("spec", "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                           "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` "
                           "(only additions to existing tolerations), `spec.terminationGracePeriodSeconds`"))
    if kind.plural == "services":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if old is not None and (old.get("spec") or {}).get("clusterIP") not in (None, spec.get("clusterIP")):
            causes.append(("spec.clusterIP", "Invalid value: field is immutable"))
    if causes:
        raise invalid(kind.kind, kind.group, name, causes)


def _pod_spec_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    def strip(spec: Mapping[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(dict(spec))
        for key in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "nodeName"):
            out.pop(key, None)
        for c in [*out.get("containers", []), *out.get("initContainers", [])]:
            c.pop("image", None)
        return out
    return strip(old) != strip(new)


def check_namespace_of(body_ns: str | None, url_ns: str | None) -> None:
    if body_ns and url_ns and body_ns != url_ns:
        raise ApiStatusError(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request")
