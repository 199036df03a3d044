"""Rule parameters arrive as strings (SageMaker's ``RuleParameters`` is a string map); these
parse them with messages that say exactly which parameter is wrong and why."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from murphy.exceptions import SMDebugValueError


class RuleParameterError(SMDebugValueError):
    """A rule parameter is missing or cannot be parsed."""


def _fail(rule: str, name: str, value: Any, expected: str) -> RuleParameterError:
    return RuleParameterError(f"{rule}: parameter {name}={value!r} is not {expected}")


def as_float(value: Any, name: str, rule: str) -> float:
    if isinstance(value, bool):
        raise _fail(rule, name, value, "a number")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise _fail(rule, name, value, "a number")


def as_optional_float(value: Any, name: str, rule: str) -> float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None
    return as_float(value, name, rule)


def as_int(value: Any, name: str, rule: str) -> int:
    if isinstance(value, bool):
        raise _fail(rule, name, value, "an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                f = float(text)
            except ValueError:
                pass
            else:
                if f.is_integer():
                    return int(f)
    raise _fail(rule, name, value, "an integer")


def as_optional_int(value: Any, name: str, rule: str) -> int | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None
    return as_int(value, name, rule)


def as_bool(value: Any, name: str, rule: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise _fail(rule, name, value, "a boolean (true/false)")


def as_list(value: Any, name: str, rule: str) -> list[str]:
    """A comma-separated string or a list of strings; None/"" is an empty list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return list(value)
    raise _fail(rule, name, value, "a comma-separated list")
