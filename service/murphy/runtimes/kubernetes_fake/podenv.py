"""What the kubelet computes for a container before starting it: its environment (``env`` with
``$(VAR)`` expansion, ``valueFrom`` ConfigMap/Secret keys and downward-API fields, ``envFrom``)
and its volumes' contents (emptyDir, configMap, secret, hostPath) in the pod's directory.
A missing ConfigMap, Secret or key raises :class:`ConfigError` with the kubelet's message
(the container waits with ``CreateContainerConfigError``; a volume's waits the pod in
``ContainerCreating`` with a FailedMount event)."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from typing import Any

from murphy.runtimes.kubernetes_fake.quantity import parse_quantity
from murphy.runtimes.kubernetes_fake.store import Obj, Store

_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_REF = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")
_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


class ConfigError(Exception):
    pass


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` references: defined ones expand, ``$$`` escapes, others stay."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)
    return _REF.sub(sub, text)


def _source(store: Store, kind: str, ns: str, name: str, optional: bool) -> dict[str, str] | None:
    obj = store.find("configmaps" if kind == "ConfigMap" else "secrets", ns, name)
    if obj is None:
        if optional:
            return None
        raise ConfigError(f'{"configmap" if kind == "ConfigMap" else "secret"} "{name}" not found')
    if kind == "ConfigMap":
        return dict(obj.get("data") or {})
    return {k: base64.b64decode(v).decode("utf-8", "replace") for k, v in (obj.get("data") or {}).items()}


def field_ref(pod: Obj, path: str) -> str:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    m = _FIELD.match(path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    simple = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
              "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
              "spec.serviceAccountName": spec.get("serviceAccountName"), "status.podIP": status.get("podIP"),
              "status.hostIP": status.get("hostIP")}
    if path not in simple:
        raise ConfigError(f"unsupported fieldRef {path!r}")
    return str(simple[path] or "")


def _resource_ref(container: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
    section, _, resource = str(ref.get("resource", "")).partition(".")
    value = ((container.get("resources") or {}).get(section) or {}).get(resource)
    if value is None:
        return "0"
    q = parse_quantity(str(value))
    divisor = parse_quantity(str(ref.get("divisor", "1")))
    return str(max(1, int(-(-q // divisor))) if resource == "cpu" else int(q // divisor))


def container_env(store: Store, pod: Obj, container: Mapping[str, Any], base: Mapping[str, str]) -> dict[str, str]:
    ns = pod["metadata"]["namespace"]
    env: dict[str, str] = dict(base)
    for src in container.get("envFrom") or []:
        prefix = src.get("prefix", "")
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            ref = src.get(key)
            if ref:
                data = _source(store, kind, ns, ref.get("name", ""), bool(ref.get("optional")))
                for k, v in (data or {}).items():
                    if _ENV_NAME.match(prefix + k):
                        env[prefix + k] = v
    for var in container.get("env") or []:
        name = var["name"]
        if "value" in var or "valueFrom" not in var:
            env[name] = expand(str(var.get("value", "")), env)
            continue
        vf = var["valueFrom"]
        for kind, key, what in (("ConfigMap", "configMapKeyRef", "ConfigMap"), ("Secret", "secretKeyRef", "Secret")):
            ref = vf.get(key)
            if ref:
                data = _source(store, kind, ns, ref.get("name", ""), bool(ref.get("optional")))
                if data is None:
                    break
                if ref.get("key") not in data:
                    if ref.get("optional"):
                        break
                    raise ConfigError(f"couldn't find key {ref.get('key')} in {what} {ns}/{ref.get('name')}")
                env[name] = data[ref["key"]]
        if "fieldRef" in vf:
            env[name] = field_ref(pod, vf["fieldRef"].get("fieldPath", ""))
        if "resourceFieldRef" in vf:
            env[name] = _resource_ref(container, vf["resourceFieldRef"])
    return env


def _write_files(dir_: str, data: Mapping[str, bytes], items: list[Mapping[str, Any]] | None, mode: int) -> None:
    os.makedirs(dir_, exist_ok=True)
    chosen = [(i["key"], i.get("path", i["key"]), int(i.get("mode", mode))) for i in items or [] if i.get("key") in data] \
        if items else [(k, k, mode) for k in data]
    for key, path, m in chosen:
        target = os.path.join(dir_, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data[key])
        os.chmod(target, m)


def setup_volume(store: Store, pod: Obj, volume: Mapping[str, Any], dir_: str) -> None:
    """Make volume ``volume``'s directory at ``dir_`` (idempotent); raises :class:`ConfigError`."""
    ns, name = pod["metadata"]["namespace"], volume.get("name", "")
    if "emptyDir" in volume:
        os.makedirs(dir_, exist_ok=True)
        os.chmod(dir_, 0o777)
    elif "configMap" in volume:
        cm = volume["configMap"]
        obj = store.find("configmaps", ns, cm.get("name", ""))
        if obj is None and not cm.get("optional"):
            raise ConfigError(f'MountVolume.SetUp failed for volume "{name}" : configmap "{cm.get("name")}" not found')
        data = {k: v.encode() for k, v in ((obj or {}).get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in ((obj or {}).get("binaryData") or {}).items()})
        _write_files(dir_, data, cm.get("items"), int(cm.get("defaultMode", 0o644)))
    elif "secret" in volume:
        sec = volume["secret"]
        obj = store.find("secrets", ns, sec.get("secretName", ""))
        if obj is None and not sec.get("optional"):
            raise ConfigError(f'MountVolume.SetUp failed for volume "{name}" : secret "{sec.get("secretName")}" not found')
        data = {k: base64.b64decode(v) for k, v in ((obj or {}).get("data") or {}).items()}
        _write_files(dir_, data, sec.get("items"), int(sec.get("defaultMode", 0o644)))
    elif "hostPath" in volume:
        path = volume["hostPath"].get("path", "")
        if not os.path.exists(path):
            if volume["hostPath"].get("type") not in ("DirectoryOrCreate", "", None):
                raise ConfigError(f'MountVolume.SetUp failed for volume "{name}" : hostPath type check failed: {path} does not exist')
            os.makedirs(path, exist_ok=True)
        if not os.path.lexists(dir_):
            os.symlink(path, dir_)
    else:
        kinds = sorted(set(volume) - {"name"})
        raise ConfigError(f'MountVolume.SetUp failed for volume "{name}" : this fake kubelet does not support {kinds}')
