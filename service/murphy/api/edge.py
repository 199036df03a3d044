"""The edge: one ASGI middleware every HTTP request passes before any route sees it.

It reads the body once (refusing more than ``Settings.max_body_bytes`` with a 413 only after
draining what the client sends, so the client reads the answer instead of a connection reset;
a client that stalls mid-body gets a 408 after ``body_read_timeout_s``), then, with
``--auth sigv4``, verifies the SigV4 signature (:mod:`murphy.auth.verifier`) and puts the
:class:`~murphy.auth.verifier.Principal` in ``scope["state"]["principal"]``. Being a middleware,
it covers every route there is and every route added later (the dashboard's included); only
``Settings.auth_public_paths`` (``/healthz``) are answered without a signature.

Errors have the protocol's shape: AWS JSON 1.1 (``POST /``) answers 400 with
``{"__type", "message"}`` as AWS's JSON services do; every other route answers the REST
mirror's body with 403 (413, 408 for the body checks).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from murphy.api.errors import AMZ_JSON, error_body
from murphy.auth.verifier import HttpRequest
from murphy.exceptions import (
    AuthFailure,
    MissingAuthenticationTokenException,
    RequestEntityTooLargeException,
    ServiceError,
)

if TYPE_CHECKING:
    from murphy.api.ui_login import UiAuth
    from murphy.auth.verifier import Principal, Verifier
    from murphy.settings import Settings

log = logging.getLogger("murphy.api.edge")
#: A body larger than this is not drained (the connection is closed at once).
MAX_DRAIN_BYTES = 64 * 1024 * 1024
_WIRE_SERVICES = {"SageMaker": "sagemaker", "Logs_20140328": "logs"}
_REST_SERVICES = frozenset({"sagemaker", "murphy"})
#: REST mirror routes that are SageMaker operations, for keys limited to some actions.
_REST_ACTIONS = {("GET", "/v1/training-jobs"): "sagemaker:ListTrainingJobs"}


class RequestTimeout(ServiceError):
    """The client stopped sending its body."""

    http_status = 408


class RequestHeaderFieldsTooLarge(ServiceError):
    http_status = 431


def wire_service(target: str | None) -> tuple[frozenset[str], str | None]:
    """Services a wire request may be signed for, and the IAM-style action it calls."""
    prefix, _, op = (target or "").partition(".")
    service = _WIRE_SERVICES.get(prefix)
    if service is None or not op:
        return frozenset(_WIRE_SERVICES.values()), None  # the handler rejects the target itself
    return frozenset({service}), f"{service}:{op}"


def rest_action(method: str, path: str) -> str:
    found = _REST_ACTIONS.get((method, path))
    if found:
        return found
    if path.startswith("/v1/training-jobs/"):
        return "sagemaker:StopTrainingJob" if method == "POST" else "sagemaker:DescribeTrainingJob"
    return "murphy:Read" if method in ("GET", "HEAD") else "murphy:Write"


class EdgeMiddleware:
    def __init__(self, app: ASGIApp, settings: Settings, verifier: Verifier | None,
                 ui_auth: UiAuth | None = None) -> None:
        self.app = app
        self.settings = settings
        self.verifier = verifier
        self.ui_auth = ui_auth
        self.public = frozenset(settings.auth_public_paths)
        if ui_auth is not None:
            from murphy.api.ui_login import PUBLIC

            self.public |= PUBLIC

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        wire = scope["path"] == "/" and scope["method"] == "POST"
        headers: dict[str, list[str]] = {}
        size = 0
        for name, value in scope["headers"]:
            size += len(name) + len(value)
            headers.setdefault(name.decode("latin-1"), []).append(value.decode("latin-1"))
        try:
            body = await self._read_body(receive, headers)
            if body is None:
                return  # the client left
            if size > self.settings.max_header_bytes or len(scope["headers"]) > self.settings.max_headers:
                raise RequestHeaderFieldsTooLarge(
                    f"The request headers ({len(scope['headers'])} fields, {size} bytes) exceed the limit of "
                    f"{self.settings.max_headers} fields and {self.settings.max_header_bytes} bytes.")
            if self.verifier is not None and scope["path"] not in self.public:
                principal = await self._authenticate(scope, headers, body, wire)
                scope.setdefault("state", {})["principal"] = principal
        except MissingAuthenticationTokenException as e:
            if self.ui_auth is not None and scope["method"] in ("GET", "HEAD") and scope["path"].startswith("/ui"):
                await self._to_login(send, scope)  # a browser page without a session: the login form
            else:
                await self._refuse(send, e, wire)
            return
        except ServiceError as e:
            await self._refuse(send, e, wire)
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read_body(self, receive: Receive, headers: dict[str, list[str]]) -> bytes | None:
        limit = self.settings.max_body_bytes
        declared = (headers.get("content-length") or [""])[0]
        too_large = declared.isdigit() and int(declared) > limit
        chunks: list[bytes] = []
        size = 0
        while True:
            with anyio.move_on_after(self.settings.body_read_timeout_s) as waited:
                message = await receive()
            if waited.cancel_called:
                raise RequestTimeout(f"The request body did not arrive within {self.settings.body_read_timeout_s:g} s.")
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                too_large = True
            if not too_large:
                chunks.append(chunk)
            if not message.get("more_body", False) or size > MAX_DRAIN_BYTES:
                break
        if too_large:
            raise RequestEntityTooLargeException(f"The request body is larger than the {limit}-byte limit.")
        return b"".join(chunks)

    async def _authenticate(self, scope: Scope, headers: dict[str, list[str]], body: bytes, wire: bool) -> Principal:
        assert self.verifier is not None
        raw_query = scope.get("query_string", b"").decode("latin-1")
        signed = "authorization" in headers or "X-Amz-Signature" in raw_query
        if self.ui_auth is not None and not wire and not signed:
            # A browser's dashboard session (murphy.api.ui_login); without one, SigV4's answer.
            from_session = await self.ui_auth.principal(scope["method"], scope["path"], headers)
            if from_session is not None:
                from_session.require(rest_action(scope["method"], scope["path"]))
                return from_session
        req = HttpRequest(scope["method"], scope.get("raw_path", scope["path"].encode()).decode("latin-1"),
                          raw_query, headers, body, secure=scope.get("scheme") == "https")
        if wire:
            services, action = wire_service(req.header("x-amz-target"))
        else:
            services, action = _REST_SERVICES, rest_action(scope["method"], scope["path"])
        query = dict(parse_qsl(raw_query, keep_blank_values=True)) if raw_query else {}
        return await self._verify(req, query, services, action)

    async def _verify(self, req: HttpRequest, query: dict[str, str], services: frozenset[str],
                      action: str | None) -> Principal:
        assert self.verifier is not None
        claim = self.verifier.claim(req, query)
        key = self.verifier.key(claim.access_key_id)
        if key is None:
            key = await run_in_threadpool(self.verifier.load, claim.access_key_id)
        principal = self.verifier.verify(req, claim, key, services)
        if action is not None:
            principal.require(action)
        return principal

    async def _to_login(self, send: Send, scope: Scope) -> None:
        from murphy.api.ui_login import login_redirect

        status, headers = login_redirect(scope["path"], scope.get("query_string", b"").decode("latin-1"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    async def _refuse(self, send: Send, error: ServiceError, wire: bool) -> None:
        if isinstance(error, AuthFailure):
            status = error.http_status if wire else 403
            # The code only: never the key id or anything from the signature in the log.
            log.info("refused an unauthenticated request: %s", error.code)
        else:
            status = error.http_status
        headers = [(b"content-type", (AMZ_JSON if wire else "application/json").encode())]
        if not isinstance(error, AuthFailure):
            headers.append((b"connection", b"close"))  # the body was not (or not all) read
        body = error_body(error)
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

