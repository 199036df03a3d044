"""The HTTP front of the fake API server: Kubernetes' REST paths on Starlette, served by uvicorn
on 127.0.0.1 in a thread. Every request goes to the :class:`~.store.Store` (or the kubelet for
``pods/{name}/log``); errors are ``Status`` bodies with ``Content-Type: application/json``.

Paths: ``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>/<version>`` (discovery), ``/version``,
``/healthz``, ``/livez``, ``/readyz``; ``/api/v1/...`` and ``/apis/<g>/<v>/...`` for the
resources of :mod:`.kinds` (namespaced and all-namespace collections, items, ``status``, ``log``);
``/fake/v1/...``: the control API of :mod:`.control` (faults, history compaction).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import uvicorn
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from murphy.runtimes.kubernetes_fake import events_v1, kinds, tables
from murphy.runtimes.kubernetes_fake.errors import ApiStatusError, bad_request, method_not_allowed
from murphy.runtimes.kubernetes_fake.kinds import Kind
from murphy.runtimes.kubernetes_fake.selectors import field_selector, label_selector
from murphy.runtimes.kubernetes_fake.store import Change, Obj

if TYPE_CHECKING:
    from murphy.runtimes.kubernetes_fake.cluster import FakeCluster

JSON = "application/json"


def _json(doc: Any, status: int = 200) -> Response:
    return Response(json.dumps(doc), status_code=status, media_type=JSON)


def _error(e: ApiStatusError) -> Response:
    response = _json(e.body(), e.code)
    if e.code == 429:
        response.headers["Retry-After"] = "1"
    return response


class Ticker:
    """Wakes the streaming handlers (watches, log follows) when anything changes."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fut: asyncio.Future[None] | None = None

    def bind(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._fut = self._loop.create_future()

    def poke(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        assert self._loop is not None and self._fut is not None
        if not self._fut.done():
            self._fut.set_result(None)
        self._fut = self._loop.create_future()

    async def wait(self, timeout: float) -> None:
        self.bind()
        assert self._fut is not None
        await asyncio.wait({asyncio.shield(self._fut)}, timeout=timeout)


class Api:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.ticker = Ticker()
        self.store.subscribe(self.ticker.poke)
        self.store.subscribe_logs(self.ticker.poke)
        self.app = Starlette(routes=[Route("/{path:path}", self.handle, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])])

    async def handle(self, request: Request) -> Response:
        self.ticker.bind()
        path = request.url.path
        self.cluster.requests.count(request.method, path)
        injected = None if path.startswith("/fake/") else self.cluster.errors.take(request.method, path)
        try:
            if injected is not None:
                if injected.delay_s:
                    await asyncio.sleep(injected.delay_s)
                if injected.code:
                    raise injected.status()
            return await self._dispatch(request)
        except ApiStatusError as e:
            return _error(e)

    async def _dispatch(self, request: Request) -> Response:
        path = request.url.path.rstrip("/")
        parts = [p for p in path.split("/") if p]
        if path in ("/healthz", "/livez", "/readyz"):
            return PlainTextResponse("ok")
        if path == "/version":
            return _json(kinds.VERSION)
        if parts and parts[0] == "fake":
            return await self.cluster.control.handle(request, parts[1:])
        if parts == ["api"]:
            return _json(kinds.api_versions())
        if parts == ["apis"]:
            return _json(kinds.api_groups())
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 2:
            if len(parts) == 2:
                doc = kinds.api_group(parts[1])
                if doc is None:
                    raise ApiStatusError(404, "NotFound", "the server could not find the requested resource")
                return _json(doc)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiStatusError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            doc = kinds.resource_list(group, version)
            if doc is None:
                raise ApiStatusError(404, "NotFound", "the server could not find the requested resource")
            return _json(doc)
        ns: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and kinds.kind_for(group, version, rest[2]):
            ns, rest = rest[1], rest[2:]
        kind = kinds.kind_for(group, version, rest[0])
        if kind is None or len(rest) > 3 or (kind.namespaced is False and ns is not None):
            raise ApiStatusError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in kind.subresources:
            raise ApiStatusError(404, "NotFound", "the server could not find the requested resource")
        if kind.namespaced and name is not None and ns is None:
            raise ApiStatusError(404, "NotFound", "the server could not find the requested resource")
        if name is None:
            return await self._collection(request, kind, ns)
        if sub == "log":
            if request.method != "GET":
                raise method_not_allowed()
            return await self._log(request, ns or "", name)
        return await self._item(request, kind, ns, name, sub)

    # --- collections ---------------------------------------------------------------------
    async def _collection(self, request: Request, kind: Kind, ns: str | None) -> Response:
        q = request.query_params
        if request.method == "GET":
            if q.get("watch") in ("true", "1"):
                return self._watch(request, kind, ns)
            if tables.wants_table(request.headers.get("accept", "")):
                items, rv = self.store.list(kind, ns, self._matcher(kind, q))
                return _json(tables.table(kind, [self._out(kind, o) for o in items], str(rv), q.get("includeObject")))
            return self._list(kind, ns, q)
        if request.method == "POST":
            body = await self._body(request)
            if kind.storage == "events":
                body = events_v1.from_v1(body)
            obj = self.store.create(kinds.BY_KEY[kind.key], ns, body, dry_run=bool(q.get("dryRun")))
            return _json(self._out(kind, obj), 201)
        if request.method == "DELETE":
            items, _ = self.store.list(kind, ns, self._matcher(kind, q))
            opts = await self._delete_options(request)
            for o in items:
                with contextlib.suppress(ApiStatusError):
                    self.store.delete(kind, ns, o["metadata"]["name"], **opts)
            return self._list(kind, ns, q)
        raise method_not_allowed()

    @staticmethod
    def _out(kind: Kind, obj: Obj) -> Obj:
        return events_v1.to_v1(obj) if kind.storage == "events" else obj

    @staticmethod
    def _matcher(kind: Kind, q: Any) -> Callable[[Obj], bool]:
        fsel = q.get("fieldSelector")
        if kind.storage == "events":
            fsel = events_v1.field_alias(fsel)
        lm, fm = label_selector(q.get("labelSelector")), field_selector(fsel)
        return lambda o: lm(o) and fm(o)

    def _list(self, kind: Kind, ns: str | None, q: Any) -> Response:
        items, rv = self.store.list(kind, ns, self._matcher(kind, q))
        start = 0
        if q.get("continue"):
            try:
                start = int(json.loads(base64.b64decode(q["continue"]))["start"])
            except (ValueError, KeyError, TypeError) as e:
                raise bad_request("continue key is not valid") from e
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        limit = int(q.get("limit") or 0)
        page = items[start:start + limit] if limit > 0 else items[start:]
        if limit > 0 and start + limit < len(items):
            meta["continue"] = base64.b64encode(json.dumps({"start": start + limit, "rv": rv}).encode()).decode()
            meta["remainingItemCount"] = len(items) - start - limit
        out = []
        for o in page:
            o = self._out(kind, o)
            o.pop("apiVersion", None)
            o.pop("kind", None)
            out.append(o)
        return _json({"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": meta, "items": out})

    def _watch(self, request: Request, kind: Kind, ns: str | None) -> Response:
        q = request.query_params
        match = self._matcher(kind, q)
        rv_param = q.get("resourceVersion")
        timeout = float(q.get("timeoutSeconds") or 1800)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        as_table = tables.wants_table(request.headers.get("accept", ""))

        def event(type_: str, obj: Obj) -> bytes:
            out = self._out(kind, obj)
            if as_table and type_ not in ("ERROR", "BOOKMARK"):  # kubectl get -w: one row per event
                out = tables.table(kind, [out], out["metadata"].get("resourceVersion", ""), q.get("includeObject"))
            return (json.dumps({"type": type_, "object": out}) + "\n").encode()

        async def stream() -> AsyncIterator[bytes]:
            deadline = time.monotonic() + timeout
            if not rv_param or rv_param == "0":
                items, last = self.store.list(kind, ns, match)
                for o in items:
                    yield event("ADDED", o)
            else:
                try:
                    last = int(rv_param)
                except ValueError:
                    yield event("ERROR", bad_request(f"invalid resource version {rv_param!r}").body())
                    return
            while time.monotonic() < deadline:
                try:
                    changes = self.store.changes_since(last, kind.key)
                except ApiStatusError as e:
                    yield event("ERROR", e.body())
                    return
                for c in changes:
                    last = c.rv
                    out = self._filter(c, ns, match)
                    if out:
                        yield event(*out)
                if await request.is_disconnected():
                    return
                await self.ticker.wait(min(1.0, max(0.0, deadline - time.monotonic())))
            if bookmarks:
                yield event("BOOKMARK", {"kind": kind.kind, "apiVersion": kind.api_version,
                                         "metadata": {"resourceVersion": str(last)}})

        return StreamingResponse(stream(), media_type=JSON)

    @staticmethod
    def _filter(c: Change, ns: str | None, match: Callable[[Obj], bool]) -> tuple[str, Obj] | None:
        if ns is not None and c.obj["metadata"].get("namespace") != ns:
            return None
        now_in = c.type != "DELETED" and match(c.obj)
        was_in = c.old is not None and c.type != "ADDED" and match(c.old)
        if c.type == "DELETED":
            return ("DELETED", c.obj) if was_in else None
        if now_in and was_in:
            return ("MODIFIED", c.obj)
        if now_in:
            return ("ADDED", c.obj)
        if was_in:
            return ("DELETED", c.obj)
        return None

    # --- items ---------------------------------------------------------------------------
    async def _item(self, request: Request, kind: Kind, ns: str | None, name: str, sub: str | None) -> Response:
        q = request.query_params
        dry = bool(q.get("dryRun"))
        storage_kind = kinds.BY_KEY[kind.key]
        if request.method == "GET":
            obj = self._out(kind, self.store.get(storage_kind, ns, name))
            if tables.wants_table(request.headers.get("accept", "")) and sub is None:
                return _json(tables.table(kind, [obj], obj["metadata"]["resourceVersion"], q.get("includeObject")))
            return _json(obj)
        if request.method == "PUT":
            body = await self._body(request)
            if kind.storage == "events":
                body = events_v1.from_v1(body)
            return _json(self._out(kind, self.store.replace(storage_kind, ns, name, body, sub, dry)))
        if request.method == "PATCH":
            ctype = request.headers.get("content-type", "")
            body = await self._body(request, yaml_ok=True)
            obj = self.store.patch(storage_kind, ns, name, ctype, body, sub, dry, force=q.get("force") == "true")
            return _json(self._out(kind, obj))
        if request.method == "DELETE":
            opts = await self._delete_options(request)
            return _json(self._out(kind, self.store.delete(storage_kind, ns, name, dry_run=dry, **opts)))
        raise method_not_allowed()

    @staticmethod
    async def _body(request: Request, yaml_ok: bool = False) -> Any:
        raw = await request.body()
        try:
            if yaml_ok and "yaml" in request.headers.get("content-type", ""):
                return yaml.safe_load(raw)
            return json.loads(raw or b"{}")
        except (ValueError, yaml.YAMLError) as e:
            raise bad_request(f"the request body is not valid JSON: {e}") from e

    async def _delete_options(self, request: Request) -> dict[str, Any]:
        q = request.query_params
        raw = await request.body()
        body: dict[str, Any] = {}
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError as e:
                raise bad_request(f"the DeleteOptions body is not valid JSON: {e}") from e
        propagation = body.get("propagationPolicy") or q.get("propagationPolicy")
        if body.get("orphanDependents") is True or q.get("orphanDependents") == "true":
            propagation = "Orphan"
        if propagation not in (None, "Orphan", "Background", "Foreground"):
            raise ApiStatusError(422, "Invalid", f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: '
                                 f'Unsupported value: "{propagation}": supported values: "Foreground", "Background", "Orphan"')
        grace = body.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
        return {"propagation": propagation, "grace": int(grace) if grace is not None else None,
                "preconditions": body.get("preconditions")}

    async def _log(self, request: Request, ns: str, name: str) -> Response:
        q = request.query_params
        buf = self.cluster.kubelet.log_buffer(ns, name, q.get("container"), previous=q.get("previous") == "true")
        follow = q.get("follow") in ("true", "1")
        opts = buf.options(timestamps=q.get("timestamps") in ("true", "1"), since_seconds=q.get("sinceSeconds"),
                           since_time=q.get("sinceTime"), tail_lines=q.get("tailLines"), limit_bytes=q.get("limitBytes"))
        if not follow:
            return Response(b"".join(buf.read(opts)[0]), media_type="text/plain")

        async def stream() -> AsyncIterator[bytes]:
            pos: int | None = None
            rotations = buf.rotations
            while True:
                chunks, pos, done = buf.read(opts, pos)
                for c in chunks:
                    yield c
                if done or buf.rotations != rotations or await request.is_disconnected():
                    return
                await self.ticker.wait(1.0)

        return StreamingResponse(stream(), media_type="text/plain")


class HttpServer:
    """uvicorn serving :class:`Api` on ``127.0.0.1:<port>`` in a daemon thread."""

    def __init__(self, app: Callable[..., Awaitable[None]], port: int = 0) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                                access_log=False, timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="fake-apiserver", daemon=True)

    def start(self, timeout: float = 20.0) -> str:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake Kubernetes API server did not start")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
