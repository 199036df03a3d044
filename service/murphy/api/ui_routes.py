"""The dashboard's JSON and live routes, under ``/v1/training-jobs/{name}/...`` and ``/v1/ui/...``.

Ordinary FastAPI routes on the API's app, so whatever dependency guards the API (authentication,
account scoping) guards them too. Reads go through ``murphy.ui`` (``murphy.trial`` with a per-job
cache) in a worker thread. Bad parameters answer 400 ``ValidationException``; an unknown job 404.

Live updates are one Server-Sent Events stream per page: ``/v1/training-jobs/{name}/live`` sends
``job`` (the Job document, when it changes) and ``steps`` (``{"last_step": n}``, when new steps
were saved; charts then fetch ``series?after=``); ``/v1/ui/jobs/live`` sends ``jobs`` rows.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from murphy.api.errors import as_service_error, error_response, rest_status
from murphy.api.events_routes import EventStreamResponse
from murphy.api.metrics import ApiMetrics
from murphy.api.wire import request_id
from murphy.exceptions import (
    JobNotFound,
    MissingCollectionFiles,
    ResourceNotFound,
    SMDebugError,
    ValidationException,
)
from murphy.jobs.model import JobRecord
from murphy.jobs.plans import open_uri, tensor_uri
from murphy.jobs.service import NOT_FOUND, JobService
from murphy.settings import Settings
from murphy.store.base import JobQuery
from murphy.ui import views
from murphy.ui.jobview import HeartbeatReader, job_json, job_row
from murphy.ui.tensors import CacheRegistry, TensorCache

_JSON = "application/json"
LIVE_POLL_S = 0.25


def _int(raw: str | None, what: str, default: int | None = None) -> int | None:
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValidationException(f"'{what}' must be an integer, not {raw!r}.") from None


def _count(raw: str | None, what: str, default: int) -> int:
    value = _int(raw, what)
    return default if value is None else value


class UiRoutes:
    def __init__(self, service: JobService, settings: Settings, metrics: ApiMetrics) -> None:
        self.service = service
        self.settings = settings
        self.metrics = metrics
        self.caches = CacheRegistry()
        self.beats = HeartbeatReader(lambda uri: open_uri(settings, uri))
        self.closing = False

    def close_streams(self) -> None:
        """Server shutdown: the live streams end within a poll interval."""
        self.closing = True

    # --- plumbing -------------------------------------------------------------------------------

    @staticmethod
    def _account(request: Request) -> str | None:
        """The verified caller's account under ``--auth sigv4``; None (every job) without auth,
        where nothing is verified and the dashboard shows the whole server, as before."""
        principal = request.scope.get("state", {}).get("principal")
        return None if principal is None else str(principal.account)

    def _record(self, name: str, request: Request) -> JobRecord:
        # Another account's job is exactly as missing as one that does not exist (as the wire API).
        account = self._account(request)
        try:
            record = self.service.store.get(name)
        except JobNotFound:
            raise ValidationException(NOT_FOUND) from None
        if account is not None and record.account != account:
            raise ValidationException(NOT_FOUND)
        return record

    def _cache(self, record: JobRecord) -> TensorCache:
        uri = tensor_uri(record)

        def opener() -> Any:
            if uri is None:
                raise MissingCollectionFiles("this job saves no tensors (no DebugHookConfig or rules)")
            return open_uri(self.settings, uri)

        return self.caches.get(f"{record.name}@{record.creation_time}", opener)

    async def _run(self, label: str, request: Request, fn: Callable[[], Any]) -> Response:
        started = time.perf_counter()
        code = None
        try:
            try:
                result = await run_in_threadpool(fn)
            except (ValueError, re.error, SMDebugError) as e:  # bad regex, unknown tensor or step
                if isinstance(e, ValidationException):
                    raise
                raise ValidationException(str(e) or type(e).__name__) from e
            response = result if isinstance(result, Response) else JSONResponse(result)
        except Exception as e:
            error = as_service_error(e, label, request_id(request))
            response, code = error_response(error, status=rest_status(error), media_type=_JSON), error.code
        self.metrics.observe(label, time.perf_counter() - started, code)
        return response

    def _job(self, name: str, request: Request) -> dict[str, Any]:
        record = self._record(name, request)
        steps = self._cache(record).steps()
        return job_json(record, self.beats, steps[-1] if steps else None)

    # --- JSON -----------------------------------------------------------------------------------

    async def dashboard(self, request: Request, name: str) -> Response:
        return await self._run("ui.Job", request, lambda: self._job(name, request))

    async def tensors(self, request: Request, name: str) -> Response:
        q = request.query_params
        return await self._run("ui.Tensors", request, lambda: views.tensors_json(
            self._cache(self._record(name, request)), q.get("regex"), q.get("collection")))

    async def series(self, request: Request, name: str) -> Response:
        q = request.query_params

        def go() -> dict[str, Any]:
            tensor = q.get("tensor")
            if not tensor:
                raise ValidationException("'tensor' is required.")
            px = _count(q.get("px"), "px", 1000)
            return views.series_json(self._cache(self._record(name, request)), tensor, q.get("stat", "value"),
                                     _int(q.get("x0"), "x0"), _int(q.get("x1"), "x1"), px, _int(q.get("after"), "after"))

        return await self._run("ui.Series", request, go)

    async def reductions(self, request: Request, name: str) -> Response:
        q = request.query_params

        def go() -> dict[str, Any]:
            px = _count(q.get("px"), "px", 1000)
            return views.reductions_json(self._cache(self._record(name, request)), q.get("tensor", ""),
                                         _int(q.get("x0"), "x0"), _int(q.get("x1"), "x1"), px)

        return await self._run("ui.Reductions", request, go)

    async def nonfinite(self, request: Request, name: str) -> Response:
        return await self._run("ui.NonFinite", request, lambda: views.nonfinite_json(self._cache(self._record(name, request))))

    async def heatmap(self, request: Request, name: str) -> Response:
        q = request.query_params

        def go() -> Response:
            cache = self._cache(self._record(name, request))
            regex, stat, px = q.get("regex", "grad"), q.get("stat", "l2"), _count(q.get("px"), "px", 400)
            # A 1000-layer heatmap is ~100k cells: keep its encoded bytes while the trial is unchanged.
            body = cache.memo(("heatmap-bytes", regex, stat, px), lambda: json.dumps(
                views.heatmap_json(cache, regex, stat, px), separators=(",", ":"), allow_nan=False).encode())
            return Response(body, media_type=_JSON)

        return await self._run("ui.Heatmap", request, go)

    async def histogram(self, request: Request, name: str) -> Response:
        q = request.query_params
        return await self._run("ui.Histogram", request, lambda: views.histogram_json(
            self._cache(self._record(name, request)), q.get("tensor", ""), _count(q.get("bins"), "bins", 40),
            _count(q.get("px"), "px", 200)))

    async def step(self, request: Request, name: str, step: int) -> Response:
        return await self._run("ui.Step", request, lambda: views.step_json(self._cache(self._record(name, request)), step))

    async def npy(self, request: Request, name: str) -> Response:
        q = request.query_params

        def go() -> Response:
            tensor, step = q.get("tensor", ""), _int(q.get("step"), "step")
            if not tensor or step is None:
                raise ValidationException("'tensor' and 'step' are required.")
            data = self._cache(self._record(name, request)).npy(tensor, step)
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in tensor)
            return Response(data, media_type="application/octet-stream",
                            headers={"Content-Disposition": f'attachment; filename="{safe}-step{step}.npy"'})

        return await self._run("ui.Npy", request, go)

    async def logs(self, request: Request, name: str) -> Response:
        """The training container's log lines from ``cursor`` (the live log view polls this)."""
        def go() -> dict[str, Any]:
            cursor = _count(request.query_params.get("cursor"), "cursor", 0)
            record = self._record(name, request)
            if record.training is None:
                return {"lines": [], "cursor": cursor}
            page = self.service.runtime.read_logs(record.training, cursor, 5000)
            return {"lines": [e.message for e in page.events], "cursor": page.next_cursor}

        return await self._run("ui.Logs", request, go)

    async def jobs(self, request: Request) -> Response:
        q = request.query_params
        return await self._run("ui.Jobs", request, lambda: self._jobs(q.get("name"), q.get("status"), self._account(request)))

    def _jobs(self, name: str | None, status: str | None, account: str | None) -> dict[str, Any]:
        rows = [job_row(r) for r in self.service.store.query(
            JobQuery(name_contains=name or None, sort_order="Descending", limit=200))
            if account is None or r.account == account]
        if status:
            rows = [r for r in rows if r["status"] == status]
        return {"jobs": rows}

    # --- live -----------------------------------------------------------------------------------

    async def job_live(self, request: Request, name: str) -> Response:
        try:
            await run_in_threadpool(self._record, name, request)
        except Exception as e:
            error = as_service_error(e, "ui.JobLive", request_id(request))
            return error_response(error, status=rest_status(error), media_type=_JSON)
        return EventStreamResponse(self._job_events(name, request), headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def _job_events(self, name: str, request: Request) -> AsyncIterator[bytes]:
        yield b"retry: 1000\n\n"
        last_doc, last_step, quiet = "", None, time.monotonic()
        while not self.closing:
            try:
                doc = await run_in_threadpool(self._job, name, request)
            except (ResourceNotFound, ValidationException):
                return
            text = json.dumps(doc, separators=(",", ":"))
            if text != last_doc:
                yield f"event: job\ndata: {text}\n\n".encode()
                last_doc, quiet = text, time.monotonic()
            if doc["last_step"] != last_step:
                last_step = doc["last_step"]
                yield f"event: steps\ndata: {json.dumps({'last_step': last_step})}\n\n".encode()
                quiet = time.monotonic()
            if time.monotonic() - quiet > 15:
                yield b": keep-alive\n\n"
                quiet = time.monotonic()
            await anyio.sleep(LIVE_POLL_S)

    async def jobs_live(self, request: Request) -> Response:
        q = request.query_params
        name, status = q.get("name"), q.get("status")

        async def events() -> AsyncIterator[bytes]:
            yield b"retry: 1000\n\n"
            last, quiet = "", time.monotonic()
            while not self.closing:
                text = json.dumps(await run_in_threadpool(self._jobs, name, status, self._account(request)), separators=(",", ":"))
                if text != last:
                    yield f"event: jobs\ndata: {text}\n\n".encode()
                    last, quiet = text, time.monotonic()
                elif time.monotonic() - quiet > 15:
                    yield b": keep-alive\n\n"
                    quiet = time.monotonic()
                await anyio.sleep(LIVE_POLL_S * 2)

        return EventStreamResponse(events(), headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    def register(self, app: FastAPI) -> None:
        tags: list[Any] = ["dashboard"]
        base = "/v1/training-jobs/{name}"
        routes: list[tuple[str, Callable[..., Any], str]] = [
            ("/dashboard", self.dashboard, "The Job page's document: describe body, rules as fields, chart markers"),
            ("/tensors", self.tensors, "Saved tensors (?regex=&collection=) and collections"),
            ("/series", self.series, "One statistic over steps (?tensor=&stat=&x0=&x1=&px= min/max buckets; ?after= raw)"),
            ("/reductions", self.reductions, "min, max, mean, l2 and NaN/Inf counts over steps (?tensor=)"),
            ("/nonfinite", self.nonfinite, "First step with a NaN/Inf per tensor, earliest first"),
            ("/heatmap", self.heatmap, "Layers x steps of a statistic (?regex=&stat=l2&px=)"),
            ("/histogram", self.histogram, "A tensor's value histogram over steps (?tensor=&bins=&px=)"),
            ("/steps/{step}", self.step, "Every tensor saved at one step, with stats and change"),
            ("/npy", self.npy, "One saved value as a .npy file (?tensor=&step=)"),
            ("/logs", self.logs, "The training container's log lines (?cursor=)"),
            ("/live", self.job_live, "Server-Sent Events: job, steps"),
        ]
        for path, fn, summary in routes:
            app.add_api_route(base + path, fn, methods=["GET"], tags=tags, summary=summary)
        app.add_api_route("/v1/ui/jobs", self.jobs, methods=["GET"], tags=tags, summary="Jobs page rows (?name=&status=)")
        app.add_api_route("/v1/ui/jobs/live", self.jobs_live, methods=["GET"], tags=tags,
                          summary="Server-Sent Events: jobs")
