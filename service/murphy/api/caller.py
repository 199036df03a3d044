"""Who is calling: the verified principal (``--auth sigv4``, :mod:`murphy.api.edge`), else the
SigV4 ``Authorization`` header as the client wrote it (``--auth none``: nothing is verified).

The credential scope ``Credential=<AKID>/<yyyymmdd>/<region>/<service>/aws4_request`` gives the
region ARNs are built in. The account is ``Settings.default_account``, except that an access key
id of exactly 12 digits is taken as the account (the convention LocalStack uses to let one
endpoint serve several accounts). Without a usable header: the configured defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from starlette.requests import Request

from murphy.settings import Settings

_SCOPE = re.compile(r"Credential=([^/,\s]+)/\d{8}/([a-z0-9-]{1,32})/")
_ACCOUNT = re.compile(r"\d{12}")


@dataclass(frozen=True)
class Caller:
    request_id: str
    region: str
    account: str


def caller_from(authorization: str | None, settings: Settings, request_id: str) -> Caller:
    if authorization:
        m = _SCOPE.search(authorization)
        if m is not None:
            akid, region = m.group(1), m.group(2)
            account = akid if _ACCOUNT.fullmatch(akid) else settings.default_account
            return Caller(request_id, region, account)
    return Caller(request_id, settings.default_region, settings.default_account)


def caller_of(request: Request, settings: Settings) -> Caller:
    """The caller of ``request``: its verified principal's account and region when the edge
    verified one, else what :func:`caller_from` reads from the header."""
    state = request.scope.get("state", {})
    rid: str = state["request_id"]
    principal = state.get("principal")
    if principal is not None:
        return Caller(rid, principal.region, principal.account)
    return caller_from(request.headers.get("authorization"), settings, rid)
