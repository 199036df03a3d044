"""The three patch flavours of ``PATCH`` (by ``Content-Type``) and server-side apply, on plain dicts.

* ``application/merge-patch+json``: RFC 7386 (``null`` deletes a key, lists are replaced);
* ``application/strategic-merge-patch+json``: like a merge patch, but lists of objects that
  Kubernetes merges by key (containers and env by ``name``, conditions by ``type``,
  ownerReferences by ``uid``, ...) are merged item by item; ``$patch: delete`` removes an item,
  ``$patch: replace`` replaces the whole list or map; ``$retainKeys`` is accepted and ignored;
* ``application/json-patch+json``: RFC 6902 (add, remove, replace, test, copy, move);
* ``application/apply-patch+yaml``: server-side apply, approximated as a strategic merge of
  the applied configuration (no managed fields: one applier at a time).
"""

from __future__ import annotations

import copy
from typing import Any

from murphy.runtimes.kubernetes_fake.errors import ApiStatusError, bad_request

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"

#: List fields Kubernetes merges by key (a strategic merge patch's ``patchMergeKey``).
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "volumes": "name", "volumeMounts": "mountPath", "ports": "containerPort", "conditions": "type",
    "ownerReferences": "uid", "imagePullSecrets": "name", "tolerations": "key", "hostAliases": "ip",
    "containerStatuses": "name", "initContainerStatuses": "name",
}
#: Primitive lists merged as sets.
SET_LISTS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _strategic_list(key: str, target: Any, patch: list[Any]) -> list[Any]:
    merge_key = MERGE_KEYS.get(key)
    if key in SET_LISTS and isinstance(target, list):
        return list(target) + [v for v in patch if v not in target]
    if not merge_key or not all(isinstance(p, dict) for p in patch):
        return [p for p in copy.deepcopy(patch) if not (isinstance(p, dict) and "$patch" in p)]
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [p for p in copy.deepcopy(patch) if p.get("$patch") != "replace"]
    out = [copy.deepcopy(t) for t in target] if isinstance(target, list) else []
    for item in patch:
        k = item.get(merge_key)
        idx = next((i for i, t in enumerate(out) if isinstance(t, dict) and t.get(merge_key) == k), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(strategic_merge({}, item))
        else:
            out[idx] = strategic_merge(out[idx], item)
    return out


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue  # $retainKeys, $setElementOrder/...: ordering hints this fake need not honour
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list):
            out[key] = _strategic_list(key, out.get(key), value)
        else:
            out[key] = strategic_merge(out.get(key), value)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"json patch path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    for p in parts:
        doc = doc[int(p)] if isinstance(doc, list) else doc[p]
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise bad_request("a json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        try:
            kind, parts = op["op"], _pointer(op["path"])
            if kind in ("copy", "move"):
                src = _pointer(op["from"])
                value = copy.deepcopy(_walk(doc, src))
                if kind == "move":
                    parent = _walk(doc, src[:-1])
                    del parent[int(src[-1]) if isinstance(parent, list) else src[-1]]
                kind, op = "add", {**op, "value": value}
            if kind == "test":
                if _walk(doc, parts) != op["value"]:
                    raise ApiStatusError(422, "Invalid", f"the json patch test at {op['path']} failed")
                continue
            if not parts:
                doc = copy.deepcopy(op["value"])
                continue
            parent, last = _walk(doc, parts[:-1]), parts[-1]
            if kind == "remove":
                del parent[int(last) if isinstance(parent, list) else last]
            elif kind == "add" and isinstance(parent, list):
                parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(op["value"]))
            elif kind in ("add", "replace"):
                if kind == "replace" and isinstance(parent, dict) and last not in parent:
                    raise ApiStatusError(422, "Invalid", f"the json patch replace of missing {op['path']}")
                parent[int(last) if isinstance(parent, list) else last] = copy.deepcopy(op["value"])
            else:
                raise bad_request(f"unknown json patch operation {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError) as e:
            raise ApiStatusError(422, "Invalid", f"the json patch operation {op!r} cannot be applied: {e}") from e
    return doc


def apply_patch(content_type: str, target: dict[str, Any], body: Any) -> dict[str, Any]:
    kind = content_type.split(";")[0].strip()
    if kind == MERGE:
        out = merge_patch(target, body)
    elif kind in (STRATEGIC, APPLY):
        out = strategic_merge(target, body)
    elif kind == JSON_PATCH:
        out = json_patch(target, body)
    else:
        raise ApiStatusError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media types include: {MERGE}, {STRATEGIC}, {JSON_PATCH}, {APPLY}")
    if not isinstance(out, dict):
        raise bad_request("the patch does not leave an object")
    return out
