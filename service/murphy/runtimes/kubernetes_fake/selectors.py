"""Label and field selectors, as the API server parses them (``labelSelector=``, ``fieldSelector=``).

Label selectors: equality (``a=b``, ``a==b``, ``a!=b``) and set-based (``a in (x,y)``,
``a notin (x)``, ``a``, ``!a``), comma-separated terms that all must hold. Field selectors:
``path=value`` / ``path!=value`` on dotted paths (``metadata.name``, ``involvedObject.uid``,
``status.phase``, ...). A malformed selector is a 400 BadRequest, as on a real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from murphy.runtimes.kubernetes_fake.errors import bad_request

Matcher = Callable[[Mapping[str, Any]], bool]
_KEY = r"[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*([A-Za-z0-9._-]*)\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split_terms(text: str) -> list[str]:
    """Commas separate terms, except inside ``in (...)`` sets."""
    terms: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def _label_term(term: str) -> Callable[[Mapping[str, str]], bool]:
    m = _SET.match(term)
    if m:
        key, op, values = m.group(1), m.group(3), {v.strip() for v in m.group(4).split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    m = _EQ.match(term)
    if m:
        key, op, value = m.group(1), m.group(3), m.group(4)
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    m = _EXISTS.match(term)
    if m:
        negate, key = m.group(1) == "!", m.group(2)
        return lambda labels: (key in labels) != negate
    raise bad_request(f"unable to parse requirement: {term!r}: invalid label selector")


def label_selector(text: str | None) -> Matcher:
    if not text:
        return lambda obj: True
    terms = [_label_term(t) for t in _split_terms(text)]

    def match(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(t(labels) for t in terms)

    return match


def match_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A ``metav1.LabelSelector`` (``matchLabels`` + ``matchExpressions``) against ``labels``."""
    if not selector:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def field_value(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_selector(text: str | None) -> Matcher:
    if not text:
        return lambda obj: True
    terms: list[tuple[str, bool, str]] = []
    for term in _split_terms(text):
        m = re.match(r"^\s*([A-Za-z0-9_.\[\]'/-]+)\s*(==|!=|=)\s*(.*?)\s*$", term)
        if not m:
            raise bad_request(f"invalid selector: {text!r}; can't understand {term!r}")
        terms.append((m.group(1), m.group(2) == "!=", m.group(3)))

    def match(obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, path) == value) != negate for path, negate, value in terms)

    return match
