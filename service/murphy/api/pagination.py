"""Opaque, filter-bound pagination tokens.

A token is base64url of ``{"o": offset, "s": scope}``, where ``scope`` hashes the request's
filters. A token presented with different filters is rejected instead of silently paging a
different result set. Offsets are positions in the sorted result, so jobs created between two
pages can shift it (as with AWS, list results are not a snapshot).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from murphy.exceptions import ServiceError, ValidationException


def scope_of(*parts: Any) -> str:
    raw = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def encode(offset: int, scope: str) -> str:
    raw = json.dumps({"o": offset, "s": scope}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(token: str, scope: str, *, error: type[ServiceError] = ValidationException) -> int:
    """The offset in ``token``; ``error`` when it is malformed or was issued for other filters."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        offset = data["o"]
        issued_for = data["s"]
    except (binascii.Error, ValueError, TypeError, KeyError):
        raise error(f"Invalid pagination token '{token[:64]}': pass the NextToken of a previous response unchanged.") from None
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0 or not isinstance(issued_for, str):
        raise error(f"Invalid pagination token '{token[:64]}': pass the NextToken of a previous response unchanged.")
    if issued_for != scope:
        raise error("The pagination token was issued for a request with different parameters; "
                    "repeat the request's filters unchanged or start again without a token.")
    return offset
