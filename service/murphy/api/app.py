"""``create_app``: the FastAPI application (wire protocol, REST mirror, health, metrics).

No module-level app and no import-time side effects: the CLI builds the control plane, then
``create_app(plane.service, settings, plane.bus)`` and hands the result to uvicorn.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from murphy.api.edge import EdgeMiddleware
from murphy.api.errors import error_response
from murphy.api.events_routes import EventRoutes
from murphy.api.metrics import ApiMetrics
from murphy.api.rest import RestRoutes
from murphy.api.ui_pages import UiPages
from murphy.api.ui_routes import UiRoutes
from murphy.api.wire import WireHandler
from murphy.exceptions import ServiceError, ValidationException
from murphy.jobs.service import JobService
from murphy.settings import Settings

if TYPE_CHECKING:
    from murphy.auth.verifier import Verifier
    from murphy.events.bus import EventBus

_REQUEST_ID = b"x-amzn-RequestId"


class RequestIdMiddleware:
    """Gives every request an id (``scope["state"]["request_id"]``) and every response the
    ``x-amzn-RequestId`` header botocore reads into ``ResponseMetadata.RequestId``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = str(uuid.uuid4())
        scope.setdefault("state", {})["request_id"] = rid
        header = (_REQUEST_ID, rid.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        await self.app(scope, receive, send_with_id)


class _HttpError(ServiceError):
    """A routing error (unknown path, wrong method) in the wire's error format."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(message)
        self._code = code
        self.http_status = status

    @property
    def code(self) -> str:
        return self._code


_HTTP_CODES = {404: "NotFound", 405: "MethodNotAllowed"}


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "HttpError")
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    hint = " (the AWS JSON protocol is POST / with an X-Amz-Target header)" if exc.status_code in _HTTP_CODES else ""
    return error_response(_HttpError(code, f"{detail}: {request.method} {request.url.path}{hint}", exc.status_code),
                          media_type="application/json")


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
    return error_response(ValidationException(f"Invalid request: {problems}"), media_type="application/json")


def make_verifier(service: JobService, settings: Settings) -> Verifier | None:
    """The SigV4 verifier over the job store's access keys, when ``settings.auth`` asks for one."""
    if settings.auth != "sigv4":
        return None
    from murphy.auth.keys import KeyRing
    from murphy.auth.verifier import Verifier
    from murphy.store.base import AccessKeyStore

    store = service.store
    if not isinstance(store, AccessKeyStore):
        raise TypeError(f"--auth sigv4 needs a job store that keeps access keys, not {type(store).__name__}")
    return Verifier(KeyRing(store, settings), skew_s=settings.auth_clock_skew_s, cache_s=settings.auth_key_cache_s)


def create_app(service: JobService, settings: Settings, bus: EventBus | None = None) -> FastAPI:
    """``bus``: the plane's EventBus; without one the events routes answer 503. With
    ``settings.auth == "sigv4"`` every route but ``settings.auth_public_paths`` needs a signature
    (:mod:`murphy.api.edge`)."""
    metrics = ApiMetrics(service)
    app = FastAPI(
        title="murphy",
        summary="SageMaker-compatible training-job service with Debugger rules",
        description="AWS JSON 1.1 (SageMaker and CloudWatch Logs subsets) on POST /; a REST mirror under /v1.",
        redoc_url=None,
    )
    app.add_route("/", WireHandler(service, settings, metrics).handle, methods=["POST"], include_in_schema=False)
    RestRoutes(service, settings, metrics).register(app)
    app.state.events = EventRoutes(bus, settings, metrics)
    app.state.events.register(app)
    # The dashboard: its JSON/SSE routes under /v1 and its pages at /ui/ (same app, same guards).
    app.state.ui = UiRoutes(service, settings, metrics)
    app.state.ui.register(app)
    UiPages().register(app)
    verifier = make_verifier(service, settings)
    ui_auth = None
    if verifier is not None:  # a browser cannot sign: the dashboard logs in to a session instead
        from murphy.api.ui_login import UiAuth

        ui_auth = UiAuth(verifier, settings)
        ui_auth.register(app)
        app.state.ui_auth = ui_auth
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    # Inner to outer: the edge (body limits, SigV4) runs inside the request id, so its errors carry one.
    app.add_middleware(EdgeMiddleware, settings=settings, verifier=verifier, ui_auth=ui_auth)
    app.add_middleware(RequestIdMiddleware)
    app.state.metrics = metrics
    return app
