"""S3's error responses, as S3 itself writes them (the gateway answers a job's S3 client, which
parses S3's shape: ``<Error><Code>…</Code><Message>…</Message>…</Error>``, 403 / 400)."""

from __future__ import annotations

import base64
import secrets
from xml.sax.saxutils import escape

from murphy.exceptions import (
    AuthFailure,
    ExpiredTokenException,
    IncompleteSignatureException,
    InvalidSignatureException,
    MissingAuthenticationTokenException,
    UnrecognizedClientException,
)

_SKEWED = ("Signature expired", "Signature not yet current")


def s3_error(code: str, message: str, resource: str) -> tuple[bytes, dict[str, str]]:
    """The body and headers of an S3 error response."""
    request_id = secrets.token_hex(8).upper()
    host_id = base64.b64encode(secrets.token_bytes(48)).decode()
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
            f"<Resource>{escape(resource)}</Resource><RequestId>{request_id}</RequestId>"
            f"<HostId>{host_id}</HostId></Error>")
    return body.encode(), {"Content-Type": "application/xml", "x-amz-request-id": request_id, "x-amz-id-2": host_id}


def error_for(e: AuthFailure) -> tuple[int, str, str]:
    """The verifier's refusal (AWS JSON services' names) as S3 names it: (status, code, message)."""
    if isinstance(e, MissingAuthenticationTokenException):
        return 403, "AccessDenied", "Access Denied"
    if isinstance(e, IncompleteSignatureException):
        return 400, "AuthorizationHeaderMalformed", e.message
    if isinstance(e, UnrecognizedClientException):
        return 400, "InvalidToken", "The provided token is malformed or otherwise invalid."
    if isinstance(e, ExpiredTokenException):
        return 400, "ExpiredToken", "The provided token has expired."
    if isinstance(e, InvalidSignatureException):
        if e.message.startswith(_SKEWED):
            return 403, "RequestTimeTooSkewed", "The difference between the request time and the current time is too large."
        if "x-amz-content-sha256" in e.message:
            return 400, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed."
        return 403, "SignatureDoesNotMatch", ("The request signature we calculated does not match the signature you "
                                              "provided. Check your key and signing method.")
    return 403, "AccessDenied", "Access Denied"
