"""The API server's ``Status`` error bodies (``kind: Status``), which clients map to their errors:
lightkube's ``ApiError`` reads ``code``, ``reason`` and ``message`` from them."""

from __future__ import annotations

from typing import Any


class ApiStatusError(Exception):
    """An API error; :meth:`body` is the ``Status`` object the server answers with."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def body(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            doc["details"] = self.details
        return doc


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiStatusError:
    return ApiStatusError(404, "NotFound", f'{_qualified(plural, group)} "{name}" not found',
                          {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural})


def already_exists(plural: str, group: str, name: str) -> ApiStatusError:
    return ApiStatusError(409, "AlreadyExists", f'{_qualified(plural, group)} "{name}" already exists',
                          {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural})


def conflict(plural: str, group: str, name: str, why: str) -> ApiStatusError:
    return ApiStatusError(409, "Conflict", f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
                          {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural})


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiStatusError:
    """``causes``: ``(field, message)``; the message is the server's ``<Kind>.<group> "<name>" is invalid: ...``."""
    qualified = f"{kind}.{group}" if group else kind
    text = "; ".join(f"{f}: {m}" for f, m in causes)
    if len(causes) > 1:
        text = "[" + ", ".join(f"{f}: {m}" for f, m in causes) + "]"
    details: dict[str, Any] = {"name": name, "kind": kind,
                               "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes]}
    if group:
        details["group"] = group
    return ApiStatusError(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiStatusError:
    return ApiStatusError(400, "BadRequest", message)


def gone(message: str) -> ApiStatusError:
    return ApiStatusError(410, "Expired", message)


def method_not_allowed() -> ApiStatusError:
    return ApiStatusError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
