"""EventBridge event patterns: :func:`validate_pattern` and :func:`matches`.

Why murphy has its own: no maintained pure-Python matcher was found. On PyPI, ``event-ruler``
(0.3.0, December 2023) is a CPython-3.11-only binary wrapper of a Go engine, and
``aws-eventbridge-rule-syncer`` was last released in 2020; ``moto.events`` has one, but moto is a
test double (a service must not depend on it) and it neither descends into arrays of objects
nor validates filters. The semantics below follow EventBridge's "Content filtering in event
patterns" documentation, and the unit tests check its documented examples.

Supported: exact values (strings, numbers, booleans, null), ``prefix``, ``suffix`` (both also
with ``equals-ignore-case``), ``equals-ignore-case``, ``anything-but`` (values, or one of
``prefix``/``suffix``/``equals-ignore-case``/``wildcard``), ``exists``, ``numeric`` (one
comparison or a range), ``cidr``, ``wildcard``, nested fields at any depth, and ``$or``.
Matching rules: every field of the pattern must match (AND); the values listed for a field are
alternatives (OR); an array in the event matches when any element does; a pattern object over an
array of objects must hold within one element; a missing field only matches ``exists: false``.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import math
import re
from typing import Any

from murphy.exceptions import ValidationException

#: EventBridge's limit on a rule's EventPattern.
MAX_PATTERN_CHARS = 4096
MAX_DEPTH = 32

_FILTERS = ("prefix", "suffix", "equals-ignore-case", "anything-but", "numeric", "exists", "cidr",
            "wildcard")
_BUT_FILTERS = ("prefix", "suffix", "equals-ignore-case", "wildcard")
_LOWER, _UPPER = (">", ">="), ("<", "<=")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


# --- validation -------------------------------------------------------------------------------


def validate_pattern(pattern: Any) -> dict[str, Any]:
    """``pattern`` (a dict, or its JSON text) checked; raises :class:`ValidationException`
    saying what is wrong and where."""
    if isinstance(pattern, (str, bytes)):
        try:
            pattern = json.loads(pattern)
        except ValueError as e:
            raise ValidationException(f"Event pattern is not valid JSON: {e}") from None
    if not isinstance(pattern, dict):
        raise ValidationException(f"Event pattern must be a JSON object, not {_kind(pattern)}")
    try:
        size = len(json.dumps(pattern, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise ValidationException(f"Event pattern is not JSON: {e}") from None
    if size > MAX_PATTERN_CHARS:
        raise ValidationException(
            f"Event pattern is {size} characters long; the limit is {MAX_PATTERN_CHARS}")
    _check_object(pattern, "", 0)
    return pattern


def _fail(where: str, what: str) -> ValidationException:
    return ValidationException(f'Event pattern field "{where or "(top level)"}": {what}')


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _check_object(obj: dict[str, Any], path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise _fail(path, f"nested more than {MAX_DEPTH} levels deep")
    for key, value in obj.items():
        where = f"{path}.{key}" if path else key
        if key == "$or":
            if not isinstance(value, list) or len(value) < 2 or not all(
                    isinstance(v, dict) and v for v in value):
                raise _fail(where, "must be an array of at least two non-empty objects")
            for i, alt in enumerate(value):
                _check_object(alt, f"{where}[{i}]", depth + 1)
        elif isinstance(value, dict):
            if not value:
                raise _fail(where, "an empty object matches nothing; name a field to match")
            _check_object(value, where, depth + 1)
        elif isinstance(value, list):
            if not value:
                raise _fail(where, "an empty array matches nothing; list at least one value")
            for item in value:
                _check_matcher(item, where)
        else:
            raise _fail(where, f"must be an array of values to match or an object, not "
                               f"{_kind(value)} (write [{json.dumps(value)}] to match it exactly)")


def _check_matcher(item: Any, where: str) -> None:
    if item is None or isinstance(item, (bool, str)):
        return
    if isinstance(item, (int, float)):
        if not math.isfinite(item):
            raise _fail(where, "numbers must be finite")
        return
    if not isinstance(item, dict):
        raise _fail(where, f"{_kind(item)} cannot be matched: use strings, numbers, booleans, "
                           "null or a filter object such as {\"prefix\": \"...\"}")
    if len(item) != 1:
        raise _fail(where, f"a filter object has exactly one key, one of {', '.join(_FILTERS)}; "
                           f"got {sorted(item) or 'none'}")
    name, arg = next(iter(item.items()))
    if name not in _FILTERS:
        raise _fail(where, f'unknown filter "{name}"; use one of {", ".join(_FILTERS)}')
    _CHECKS[name](arg, f"{where}: {name}")


def _need_str(arg: Any, where: str, what: str = "a string") -> None:
    if not isinstance(arg, str):
        raise ValidationException(f"Event pattern field {where} must be {what}, not {_kind(arg)}")


def _check_affix(arg: Any, where: str) -> None:
    if isinstance(arg, dict) and list(arg) == ["equals-ignore-case"]:
        _need_str(arg["equals-ignore-case"], where + " equals-ignore-case")
        return
    _need_str(arg, where, 'a string or {"equals-ignore-case": "..."}')


def _check_ignore_case(arg: Any, where: str) -> None:
    _need_str(arg, where)


def _check_exists(arg: Any, where: str) -> None:
    if not isinstance(arg, bool):
        raise ValidationException(f"Event pattern field {where} must be true or false, not {_kind(arg)}")


def _check_numeric(arg: Any, where: str) -> None:
    def bad(why: str) -> ValidationException:
        return ValidationException(
            f'Event pattern field {where} {why}; write e.g. [">", 0, "<=", 5] or ["=", 3]')

    if not isinstance(arg, list) or len(arg) not in (2, 4):
        raise bad("must be an array of one or two (operator, number) pairs")
    ops, nums = arg[0::2], arg[1::2]
    for op, num in zip(ops, nums, strict=True):
        if op not in ("<", "<=", "=", ">", ">="):
            raise bad(f"has an unknown operator {json.dumps(op)}")
        if isinstance(num, bool) or not isinstance(num, (int, float)) or not math.isfinite(num):
            raise bad(f"compares with {_kind(num)}, not a finite number")
    if len(ops) == 2:
        if ops[0] not in _LOWER or ops[1] not in _UPPER:
            raise bad("range must be a lower bound (> or >=) then an upper bound (< or <=)")
        if nums[0] >= nums[1]:
            raise bad("range is empty (the lower bound is not below the upper bound)")


def _check_cidr(arg: Any, where: str) -> None:
    _need_str(arg, where)
    try:
        ipaddress.ip_network(arg, strict=False)
    except ValueError:
        raise ValidationException(f"Event pattern field {where} is not an IP address range: {arg}") from None


def _check_wildcard(arg: Any, where: str) -> None:
    _need_str(arg, where)
    if "**" in arg:
        raise ValidationException(f"Event pattern field {where} has consecutive wildcards (**)")


def _check_anything_but(arg: Any, where: str) -> None:
    if isinstance(arg, dict):
        if len(arg) != 1 or next(iter(arg)) not in _BUT_FILTERS:
            raise ValidationException(
                f"Event pattern field {where} takes values or one of "
                f"{', '.join(_BUT_FILTERS)}; got {sorted(arg)}")
        name, inner = next(iter(arg.items()))
        values = inner if name in ("equals-ignore-case", "wildcard") and isinstance(inner, list) else [inner]
        if not values:
            raise ValidationException(f"Event pattern field {where} {name} needs at least one value")
        for v in values:
            (_check_wildcard if name == "wildcard" else _need_str)(v, f"{where} {name}")
        return
    values = arg if isinstance(arg, list) else [arg]
    if not values:
        raise ValidationException(f"Event pattern field {where} needs at least one value")
    for v in values:
        if isinstance(v, bool) or v is None or not isinstance(v, (str, int, float)):
            raise ValidationException(
                f"Event pattern field {where} takes strings or numbers, not {_kind(v)}")


_CHECKS = {
    "prefix": _check_affix,
    "suffix": _check_affix,
    "equals-ignore-case": _check_ignore_case,
    "anything-but": _check_anything_but,
    "numeric": _check_numeric,
    "exists": _check_exists,
    "cidr": _check_cidr,
    "wildcard": _check_wildcard,
}


# --- matching ---------------------------------------------------------------------------------


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """Whether ``event`` matches ``pattern`` (already validated); ``{}`` matches everything."""
    return _match_fields(pattern, event)


def _match_fields(pattern: dict[str, Any], obj: Any) -> bool:
    for key, sub in pattern.items():
        if key == "$or":
            if not any(_match_fields(alt, obj) for alt in sub):
                return False
            continue
        value = obj.get(key, MISSING) if isinstance(obj, dict) else MISSING
        if isinstance(sub, dict):
            if not _match_object(sub, value):
                return False
        elif not _match_values(sub, value):
            return False
    return True


def _match_object(pattern: dict[str, Any], value: Any) -> bool:
    if isinstance(value, list):
        # An array of objects: the sub-pattern must hold within a single element.
        objects = [v for v in value if isinstance(v, dict)]
        if objects:
            return any(_match_fields(pattern, o) for o in objects)
    return _match_fields(pattern, value if isinstance(value, dict) else MISSING)


def _match_values(matchers: list[Any], value: Any) -> bool:
    values = value if isinstance(value, list) else [value]
    leaves = [v for v in values if v is not MISSING and not isinstance(v, (dict, list))]
    for m in matchers:
        if isinstance(m, dict) and "exists" in m:
            if bool(leaves) == m["exists"]:
                return True
        elif any(_match_one(m, v) for v in leaves):
            return True
    return False


def _equal(expected: Any, v: Any) -> bool:
    if expected is None or isinstance(expected, (bool, str)):
        return type(v) is type(expected) and v == expected
    # A number: 5 and 5.0 are the same number; a boolean is not one.
    return isinstance(v, (int, float)) and not isinstance(v, bool) and float(v) == float(expected)


def _match_one(m: Any, v: Any) -> bool:
    if not isinstance(m, dict):
        return _equal(m, v)
    name, arg = next(iter(m.items()))
    if name == "numeric":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        return all(_compare(float(v), op, float(n)) for op, n in zip(arg[0::2], arg[1::2], strict=True))
    if name == "anything-but":
        return _anything_but(arg, v)
    if not isinstance(v, str):
        return False
    if name in ("prefix", "suffix"):
        fold = isinstance(arg, dict)
        needle = arg["equals-ignore-case"].lower() if fold else arg
        hay = v.lower() if fold else v
        return hay.startswith(needle) if name == "prefix" else hay.endswith(needle)
    if name == "equals-ignore-case":
        return bool(v.lower() == arg.lower())
    if name == "wildcard":
        return _wildcard(arg).fullmatch(v) is not None
    if name == "cidr":
        try:
            return ipaddress.ip_address(v) in ipaddress.ip_network(arg, strict=False)
        except ValueError:
            return False
    return False


def _anything_but(arg: Any, v: Any) -> bool:
    if not isinstance(arg, dict):
        return not any(_equal(x, v) for x in (arg if isinstance(arg, list) else [arg]))
    if not isinstance(v, str):
        return False
    name, inner = next(iter(arg.items()))
    if name == "prefix":
        return not v.startswith(inner)
    if name == "suffix":
        return not v.endswith(inner)
    values = inner if isinstance(inner, list) else [inner]
    if name == "equals-ignore-case":
        return all(v.lower() != x.lower() for x in values)
    return all(_wildcard(x).fullmatch(v) is None for x in values)


def _compare(v: float, op: str, n: float) -> bool:
    if op == "<":
        return v < n
    if op == "<=":
        return v <= n
    if op == "=":
        return v == n
    if op == ">":
        return v > n
    return v >= n


@functools.lru_cache(maxsize=256)
def _wildcard(text: str) -> re.Pattern[str]:
    # "*" matches any run of characters; "\*" is a literal star.
    parts = re.split(r"(\\\*|\*)", text)
    regex = "".join(".*" if p == "*" else re.escape("*" if p == "\\*" else p) for p in parts)
    return re.compile(regex, re.DOTALL)
