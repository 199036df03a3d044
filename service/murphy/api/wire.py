"""AWS JSON 1.1 on ``POST /``: dispatch on ``X-Amz-Target`` to SageMaker and CloudWatch Logs ops.

Client mistakes (unknown target, wrong Content-Type, oversized or malformed body, invalid
members) are 4xx responses with ``__type`` and a message saying what to fix; only an unexpected
exception is a 500 ``InternalFailure``, logged with the request id it carries.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from murphy.api import logs_ops, sagemaker_ops
from murphy.api.caller import caller_of
from murphy.api.errors import AMZ_JSON, as_service_error, error_response
from murphy.api.metrics import ApiMetrics
from murphy.api.sagemaker_ops import Operation
from murphy.exceptions import (
    RequestEntityTooLargeException,
    SerializationException,
    UnknownOperationException,
)
from murphy.jobs.service import JobService
from murphy.settings import Settings

#: ``X-Amz-Target`` → operation. The key is also the operation's metrics label.
TARGETS: dict[str, Operation] = {
    **{f"SageMaker.{name}": op for name, op in sagemaker_ops.OPERATIONS.items()},
    "Logs_20140328.DescribeLogStreams": logs_ops.describe_log_streams,
    "Logs_20140328.GetLogEvents": logs_ops.get_log_events,
}
_JSON_TYPES = frozenset({"application/x-amz-json-1.1", "application/json"})
#: Operations that run on the event loop: a read of one record by its key, sub-millisecond in
#: every store (SQLite in WAL mode never waits for a writer). Handing them to the threadpool would
#: cost more than the read (~0.4 ms of thread hand-off per call, measured). Everything else (scans,
#: log reads, writes that may wait on the store's write lock) runs in the threadpool.
INLINE = frozenset({"SageMaker.DescribeTrainingJob"})


def request_id(request: Request) -> str:
    rid: str = request.scope["state"]["request_id"]
    return rid


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refusing more than ``limit`` bytes (before reading, when Content-Length says so)."""
    declared = request.headers.get("content-length")
    too_large = RequestEntityTooLargeException(f"The request body is larger than the {limit}-byte limit.")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


_JSON_NAMES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def decode_object(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}  # botocore sends {} for an empty input; accept an empty body as the same
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise SerializationException(f"The request body is not valid JSON: {e}") from None
    except RecursionError:
        raise SerializationException("The request body is nested too deeply.") from None
    if not isinstance(body, dict):
        kind = "null" if body is None else _JSON_NAMES.get(type(body), type(body).__name__)
        raise SerializationException(f"The request body must be a JSON object, not {kind}.")
    return body


def _operation(target: str | None) -> Operation:
    if not target:
        raise UnknownOperationException(
            "Missing X-Amz-Target header: AWS JSON requests name their operation there, e.g. "
            "'SageMaker.DescribeTrainingJob'."
        )
    op = TARGETS.get(target)
    if op is None:
        raise UnknownOperationException(
            f"Unknown operation '{target[:128]}'. murphy serves: {', '.join(sorted(TARGETS))}."
        )
    return op


def _check_content_type(value: str | None) -> None:
    media = (value or "").split(";", 1)[0].strip().lower()
    if media not in _JSON_TYPES:
        shown = f"'{value[:100]}'" if value else "none"
        raise SerializationException(
            f"Unsupported Content-Type {shown}: send application/x-amz-json-1.1 (or application/json)."
        )


class WireHandler:
    """The ``POST /`` endpoint."""

    def __init__(self, service: JobService, settings: Settings, metrics: ApiMetrics) -> None:
        self.service = service
        self.settings = settings
        self.metrics = metrics

    async def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        rid = request_id(request)
        target = request.headers.get("x-amz-target")
        label = target if target in TARGETS else "unknown"
        try:
            op = _operation(target)
            _check_content_type(request.headers.get("content-type"))
            body = decode_object(await read_body(request, self.settings.max_body_bytes))
            caller = caller_of(request, self.settings)
            if label in INLINE:
                result = op(self.service, caller, body)
            else:
                result = await run_in_threadpool(op, self.service, caller, body)
            response = Response(json.dumps(result).encode(), media_type=AMZ_JSON)
            code = None
        except Exception as e:
            error = as_service_error(e, label, rid)
            response, code = error_response(error), error.code
        self.metrics.observe(label, time.perf_counter() - started, code)
        return response
