"""The one place a :class:`~murphy.exceptions.ServiceError` becomes an HTTP response.

Wire (AWS JSON 1.1): ``{"__type": code, "message": text}`` with the error's own status (400 for
client errors, as AWS JSON services do). REST mirror: the same body with a status a person
expects (404 unknown job, 409 wrong state).
"""

from __future__ import annotations

import json
import logging

from starlette.responses import Response

from murphy.exceptions import (
    InternalFailure,
    ResourceInUse,
    ResourceNotFound,
    ResourceNotFoundException,
    ServiceError,
    ServiceUnavailable,
    StoreUnavailable,
    ValidationException,
)
from murphy.jobs.service import NOT_FOUND

log = logging.getLogger("murphy.api")

AMZ_JSON = "application/x-amz-json-1.1"
REQUEST_ID_HEADER = "x-amzn-RequestId"
_WRONG_STATE_PREFIX = "The request was rejected because"


def error_body(exc: ServiceError) -> bytes:
    return json.dumps({"__type": exc.code, "message": exc.message}).encode()


def error_response(exc: ServiceError, *, status: int | None = None, media_type: str = AMZ_JSON) -> Response:
    return Response(error_body(exc), status_code=status or exc.http_status, media_type=media_type)


def as_service_error(exc: Exception, operation: str, request_id: str) -> ServiceError:
    """What the client is told about ``exc``: itself if it is a ServiceError, ServiceUnavailable
    (503, retried by botocore) when the job store is down, else a logged InternalFailure."""
    if isinstance(exc, ServiceError):
        return exc
    if isinstance(exc, StoreUnavailable):
        log.warning("%s: job store unavailable (request id %s): %s", operation, request_id, exc)
        return ServiceUnavailable("The job store is unavailable; retry later.")
    log.error("internal error in %s (request id %s)", operation, request_id, exc_info=exc)
    return InternalFailure(f"An internal error occurred; quote request id {request_id} when reporting it.")


def rest_status(exc: ServiceError) -> int:
    """HTTP status for the REST mirror (the wire keeps AWS's 400s)."""
    if isinstance(exc, ResourceNotFound | ResourceNotFoundException) or (
        isinstance(exc, ValidationException) and exc.message == NOT_FOUND  # AWS's code for an unknown job
    ):
        return 404
    if isinstance(exc, ResourceInUse) or (
        isinstance(exc, ValidationException) and exc.message.startswith(_WRONG_STATE_PREFIX)
    ):
        return 409
    return exc.http_status
