"""SigV4 for murphy's own HTTP clients of the REST routes (``murphy events``, ``subscribe``).

The stock clients sign their own requests; these use ``urllib``/``http.client``, so they sign
through botocore's ``SigV4Auth`` with the usual credential chain (environment, profile, ...) and
service name ``murphy``. Without botocore or without credentials the request goes unsigned,
which a ``--auth none`` server accepts and a ``--auth sigv4`` one refuses with
``MissingAuthenticationTokenException``.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

SERVICE = "murphy"


def query_string(params: Mapping[str, Any]) -> str:
    """``params`` encoded the way SigV4 canonicalises them (only ``-_.~`` left as is), so the
    query the client signs is byte for byte the one the server canonicalises."""
    return urllib.parse.urlencode(params, quote_via=urllib.parse.quote, safe="-_.~")


def sign(method: str, url: str, headers: Mapping[str, str], body: bytes = b"") -> dict[str, str]:
    """``headers`` plus ``Authorization``, ``X-Amz-Date`` (and ``X-Amz-Security-Token``) when
    credentials are found; ``headers`` unchanged otherwise."""
    try:
        import botocore.session
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
    except ImportError:
        return dict(headers)
    session = botocore.session.get_session()
    credentials = session.get_credentials()
    if credentials is None:
        return dict(headers)
    region = session.get_config_variable("region") or "us-east-1"
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    SigV4Auth(credentials.get_frozen_credentials(), SERVICE, region).add_auth(request)
    return {k: str(v) for k, v in request.headers.items()}
