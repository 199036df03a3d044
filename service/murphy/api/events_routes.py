"""REST for events: ``/v1/subscriptions``, ``/v1/dead-letters``, ``/v1/events`` (the outbox, for
polling) and the ``/v1/events/stream`` Server-Sent Events stream, all through the
:class:`~murphy.events.bus.EventBus`.

Errors keep the REST mirror's ``{"__type", "message"}`` body: 400 bad input (invalid pattern,
non-URL target, duplicate name), 404 unknown subscription, 503 when the server has no event bus.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from enum import Enum
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from murphy.api.caller import caller_of
from murphy.api.errors import as_service_error, error_response, rest_status
from murphy.api.metrics import ApiMetrics
from murphy.api.wire import decode_object, read_body, request_id
from murphy.exceptions import ResourceNotFound, ServiceUnavailable, ValidationException
from murphy.settings import Settings

if TYPE_CHECKING:
    from murphy.events.bus import EventBus
    from murphy.store.base import DeadLetter, Subscription

log = logging.getLogger("murphy.api")
_JSON = "application/json"
#: Outbox rows read per query while a stream catches up.
STREAM_BATCH = 200
#: Longest single wait in a worker thread: a stream whose client left gives its thread back
#: within this time (the wait cannot be interrupted, only abandoned).
_WAIT_SLICE_S = 1.0


def iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def subscription_json(sub: Subscription, *, with_secret: bool = False) -> dict[str, Any]:
    # The secret is shown once, in the creation response; listings only say that one is set.
    target = {k: v for k, v in sub.target.items() if k not in ("secret", "account")}
    if sub.target.get("secret"):
        target["secret"] = sub.target["secret"] if with_secret else "****"
    out = {"id": sub.id, "name": sub.name, "pattern": sub.pattern, "target": target,
           "created_at": iso(sub.created_at)}
    if sub.target.get("account"):
        out["account"] = sub.target["account"]
    return out


def scoped(pattern: dict[str, Any] | None, account: str) -> dict[str, Any]:
    """``pattern`` narrowed to ``account``'s events: nobody reads another account's."""
    return {**(pattern or {}), "account": [account]}


def dead_letter_json(d: DeadLetter) -> dict[str, Any]:
    return {"subscription_id": d.subscription_id, "seq": d.seq, "event_id": d.event.get("id"),
            "attempts": d.attempts, "last_error": d.last_error, "failed_at": iso(d.failed_at), "event": d.event}


def parse_pattern(raw: str | None) -> dict[str, Any] | None:
    from murphy.events.patterns import validate_pattern

    if raw is None or not raw.strip():
        return None
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise ValidationException(f"The pattern is not valid JSON: {e}") from None
    return validate_pattern(value)


def parse_seq(raw: str | None, what: str) -> int | None:
    if raw is None or not raw.strip():
        return None
    try:
        seq = int(raw.strip())
    except ValueError:
        raise ValidationException(f"{what} must be an event sequence number (an integer >= 0), not {raw[:64]!r}.") from None
    if seq < 0:
        raise ValidationException(f"{what} must be >= 0, not {seq}.")
    return seq


def sse_event(seq: int, event: dict[str, Any]) -> bytes:
    data = json.dumps(event, separators=(",", ":"))  # one line: JSON escapes every newline
    kind = str(event.get("detail-type", "message")).replace("\n", " ")
    return f"id: {seq}\nevent: {kind}\ndata: {data}\n\n".encode()


class EventStreamResponse(StreamingResponse):
    """``text/event-stream`` that always watches for the client leaving, whatever the ASGI spec
    version, so a disconnect cancels the stream at once instead of at its next write."""

    media_type = "text/event-stream"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as tg:

            async def stream() -> None:
                await self.stream_response(send)
                tg.cancel_scope.cancel()

            tg.start_soon(stream)
            await self.listen_for_disconnect(receive)
            tg.cancel_scope.cancel()


class EventRoutes:
    def __init__(self, bus: EventBus | None, settings: Settings, metrics: ApiMetrics, *,
                 heartbeat_s: float = 15.0, max_streams: int = 64) -> None:
        self.bus = bus
        self.settings = settings
        self.metrics = metrics
        #: Seconds of silence after which a stream sends a comment (proxies drop idle streams).
        self.heartbeat_s = heartbeat_s
        self.max_streams = max_streams
        #: Streams open now (a client that disconnects is taken off at once).
        self.active_streams = 0
        self._limiter: anyio.CapacityLimiter | None = None
        self._closing = False

    def close_streams(self) -> None:
        """Server shutdown: every stream ends cleanly within a second (thread-safe), instead of
        holding the server until its graceful-shutdown timeout cancels it."""
        self._closing = True

    def _bus(self) -> EventBus:
        if self.bus is None:
            raise ServiceUnavailable("Events are not enabled on this server: it was started without an event bus.")
        return self.bus

    async def _run(self, label: str, request: Request, fn: Callable[[], Awaitable[Any]], status: int = 200) -> Response:
        started = time.perf_counter()
        code = None
        try:
            result = await fn()
            response: Response = (Response(status_code=204) if result is None
                                  else JSONResponse(result, status_code=status))
        except Exception as e:
            error = as_service_error(e, label, request_id(request))
            response, code = error_response(error, status=rest_status(error), media_type=_JSON), error.code
        self.metrics.observe(label, time.perf_counter() - started, code)
        return response

    def _account(self, request: Request) -> str:
        return caller_of(request, self.settings).account

    def _owned(self, sub: Subscription, account: str) -> bool:
        # Subscriptions from before accounts belong to the default account.
        return bool(sub.target.get("account", self.settings.default_account) == account)

    async def _mine(self, request: Request) -> list[Subscription]:
        account = self._account(request)
        return [s for s in await run_in_threadpool(self._bus().list_subscriptions) if self._owned(s, account)]

    async def _resolve(self, id_or_name: str, request: Request) -> Subscription:
        # Another account's subscription is exactly as unknown as one that does not exist.
        found = [s for s in await self._mine(request) if id_or_name in (s.id, s.name)]
        if not found:
            raise ResourceNotFound(f"No subscription with id or name '{id_or_name[:256]}'.")
        return found[0]

    # ---- subscriptions ------------------------------------------------------------------------

    async def create(self, request: Request) -> Response:
        async def go() -> dict[str, Any]:
            bus = self._bus()
            body = decode_object(await read_body(request, self.settings.max_body_bytes))
            name, pattern, target = body.get("name"), body.get("pattern"), body.get("target")
            if not isinstance(name, str) or not name.strip():
                raise ValidationException("'name' is required: a non-empty string naming the subscription.")
            if isinstance(pattern, str):  # a pattern as JSON text, as people paste it
                pattern = parse_pattern(pattern)
            if not isinstance(pattern, dict):
                raise ValidationException("'pattern' is required: an EventBridge event pattern (a JSON object).")
            if not isinstance(target, dict):
                raise ValidationException("'target' is required: {\"type\": \"webhook\", \"url\": ...} or "
                                          "{\"type\": \"eventbridge\", ...}.")
            start = body.get("start_seq")
            if start is not None and (not isinstance(start, int) or isinstance(start, bool) or start < 0):
                raise ValidationException("'start_seq' must be an event sequence number >= 0 (0 = replay every stored event).")
            options = {} if start is None else {"start_seq": start}
            account = self._account(request)
            sub = await run_in_threadpool(
                lambda: bus.create_subscription(name, pattern, target, account=account, **options))
            return subscription_json(sub, with_secret=True)

        return await self._run("rest.CreateSubscription", request, go, status=201)

    async def list_subscriptions(self, request: Request) -> Response:
        async def go() -> dict[str, Any]:
            return {"subscriptions": [subscription_json(s) for s in await self._mine(request)]}

        return await self._run("rest.ListSubscriptions", request, go)

    async def get(self, request: Request, id_or_name: str) -> Response:
        async def go() -> dict[str, Any]:
            return subscription_json(await self._resolve(id_or_name, request))

        return await self._run("rest.GetSubscription", request, go)

    async def delete(self, request: Request, id_or_name: str) -> Response:
        async def go() -> None:
            sub = await self._resolve(id_or_name, request)
            await run_in_threadpool(self._bus().delete_subscription, sub.id)

        return await self._run("rest.DeleteSubscription", request, go)

    # ---- dead letters ---------------------------------------------------------------------------

    async def _dead_letters(self, request: Request, id_or_name: str | None) -> Response:
        async def go() -> dict[str, Any]:
            sub_id = (await self._resolve(id_or_name, request)).id if id_or_name else None
            mine = {s.id for s in await self._mine(request)}
            letters = [d for d in await run_in_threadpool(self._bus().dead_letters, sub_id) if d.subscription_id in mine]
            return {"dead_letters": [dead_letter_json(d) for d in letters]}

        return await self._run("rest.ListDeadLetters", request, go)

    async def dead_letters(self, request: Request, id_or_name: str) -> Response:
        return await self._dead_letters(request, id_or_name)

    async def all_dead_letters(self, request: Request, subscription: str | None = None) -> Response:
        return await self._dead_letters(request, subscription)

    async def redrive(self, request: Request, id_or_name: str) -> Response:
        async def go() -> dict[str, Any]:
            body = decode_object(await read_body(request, self.settings.max_body_bytes))
            seqs = body.get("seqs")
            if seqs is not None and (not isinstance(seqs, list) or
                                     not all(isinstance(s, int) and not isinstance(s, bool) for s in seqs)):
                raise ValidationException("'seqs' must be a list of event sequence numbers (integers).")
            sub = await self._resolve(id_or_name, request)
            count = await run_in_threadpool(self._bus().redrive, sub.id, seqs)
            return {"subscription_id": sub.id, "redriven": count}

        return await self._run("rest.Redrive", request, go)

    # ---- the outbox, read by polling -------------------------------------------------------------

    async def list_events(self, request: Request, after: str | None = None, limit: str | None = None,
                          pattern: str | None = None) -> Response:
        async def go() -> dict[str, Any]:
            bus = self._bus()
            start = parse_seq(after, "'after'")
            count = parse_seq(limit, "'limit'")
            start, count = start or 0, 100 if count is None else count
            if not 1 <= count <= 1000:
                raise ValidationException(f"'limit' must be between 1 and 1000, not {count}.")
            checked = scoped(parse_pattern(pattern), self._account(request))
            rows, end = await run_in_threadpool(
                lambda: (bus.events_after(start, checked, count), bus.last_event_seq()))
            return {"events": [{"seq": seq, "event": event} for seq, event in rows], "last_seq": end}

        return await self._run("rest.ListEvents", request, go)

    # ---- the stream -----------------------------------------------------------------------------

    async def stream(self, request: Request) -> Response:
        started = time.perf_counter()
        try:
            bus = self._bus()
            pattern = scoped(parse_pattern(request.query_params.get("pattern")), self._account(request))
            header = request.headers.get("last-event-id")
            resume = parse_seq(header if header is not None else request.query_params.get("last_event_id"),
                               "Last-Event-ID")
            if self._closing:
                raise ServiceUnavailable("The server is shutting down.")
            if self.active_streams >= self.max_streams:
                raise ServiceUnavailable(f"Too many open event streams ({self.max_streams}); retry later.")
            cursor = resume if resume is not None else await run_in_threadpool(bus.last_event_seq)
        except Exception as e:
            error = as_service_error(e, "rest.EventStream", request_id(request))
            self.metrics.observe("rest.EventStream", time.perf_counter() - started, error.code)
            return error_response(error, status=rest_status(error), media_type=_JSON)
        self.metrics.observe("rest.EventStream", time.perf_counter() - started)
        return EventStreamResponse(self._events(bus, pattern, cursor),
                                   headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def _events(self, bus: EventBus, pattern: dict[str, Any] | None, cursor: int) -> AsyncIterator[bytes]:
        from murphy.events.patterns import matches

        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.max_streams)
        self.active_streams += 1
        try:
            # "retry" sets a browser's reconnect delay; the id-only block tells the client where it
            # starts, so a reconnect before its first event still resumes without a gap.
            yield f": murphy event stream from seq {cursor}\nretry: 1000\nid: {cursor}\n\n".encode()
            sent, last_write = cursor, time.monotonic()
            while not self._closing:
                rows = await run_in_threadpool(bus.events_after, cursor, None, STREAM_BATCH)
                out = []
                for seq, event in rows:
                    cursor = seq
                    if pattern is None or matches(pattern, event):
                        out.append(sse_event(seq, event))
                        sent = seq
                if out:
                    yield b"".join(out)
                    last_write = time.monotonic()
                if len(rows) == STREAM_BATCH:
                    continue
                idle = time.monotonic() - last_write
                if idle >= self.heartbeat_s:
                    # An id-only block moves the client's Last-Event-ID past events the pattern
                    # filtered out, so a reconnect does not scan them again.
                    yield (f": keep-alive\nid: {cursor}\n\n" if cursor != sent else ": keep-alive\n\n").encode()
                    sent, last_write = cursor, time.monotonic()
                    continue
                await anyio.to_thread.run_sync(bus.wait_for_events, cursor, min(self.heartbeat_s - idle, _WAIT_SLICE_S),
                                               limiter=self._limiter, abandon_on_cancel=True)
        finally:
            self.active_streams -= 1

    def register(self, app: FastAPI) -> None:
        tags: list[str | Enum] = ["events"]
        app.add_api_route("/v1/subscriptions", self.create, methods=["POST"], tags=tags,
                          summary="Create a subscription {name, pattern, target}; the response shows the secret once")
        app.add_api_route("/v1/subscriptions", self.list_subscriptions, methods=["GET"], tags=tags, summary="List subscriptions")
        app.add_api_route("/v1/subscriptions/{id_or_name}", self.get, methods=["GET"], tags=tags,
                          summary="One subscription, by id or name")
        app.add_api_route("/v1/subscriptions/{id_or_name}", self.delete, methods=["DELETE"], tags=tags,
                          summary="Delete a subscription")
        app.add_api_route("/v1/subscriptions/{id_or_name}/dead-letters", self.dead_letters, methods=["GET"],
                          tags=tags, summary="Events this subscription gave up on")
        app.add_api_route("/v1/subscriptions/{id_or_name}/redrive", self.redrive, methods=["POST"], tags=tags,
                          summary="Re-queue dead letters {seqs?}: all of them when seqs is absent")
        app.add_api_route("/v1/dead-letters", self.all_dead_letters, methods=["GET"], tags=tags,
                          summary="Dead letters of every subscription (?subscription= to narrow)")
        app.add_api_route("/v1/events", self.list_events, methods=["GET"], tags=tags,
                          summary="Stored events after a seq (?after=&limit=&pattern=), oldest first, and the last seq")
        app.add_api_route("/v1/events/stream", self.stream, methods=["GET"], tags=tags,
                          summary="Server-Sent Events; ?pattern=<JSON>, resume with Last-Event-ID")
