"""The REST mirror for people and scripts, plus ``/healthz`` and ``/metrics``.

The bodies are the wire's (ListTrainingJobs / DescribeTrainingJob JSON); errors keep the wire's
``{"__type", "message"}`` body with a REST status (404 unknown job, 409 wrong state, 400 bad input).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from murphy.api import sagemaker_ops
from murphy.api.caller import caller_of
from murphy.api.errors import as_service_error, error_response, rest_status
from murphy.api.metrics import ApiMetrics
from murphy.api.sagemaker_ops import Operation
from murphy.api.wire import request_id
from murphy.jobs.service import JobService
from murphy.settings import Settings

log = logging.getLogger("murphy.api")
_JSON = "application/json"


def _int_or_raw(value: str | None) -> int | str | None:
    # Non-numbers go through as strings, so validation reports them ("Member must be an integer").
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return value


class RestRoutes:
    def __init__(self, service: JobService, settings: Settings, metrics: ApiMetrics) -> None:
        self.service = service
        self.settings = settings
        self.metrics = metrics

    async def _run(self, label: str, request: Request, op: Operation, body: dict[str, Any],
                   *, inline: bool = False) -> Response:
        started = time.perf_counter()
        rid = request_id(request)
        caller = caller_of(request, self.settings)
        code = None
        try:
            # inline: see murphy.api.wire.INLINE
            result = op(self.service, caller, body) if inline else await run_in_threadpool(op, self.service, caller, body)
            response = Response(json.dumps(result).encode(), media_type=_JSON)
        except Exception as e:
            error = as_service_error(e, label, rid)
            response, code = error_response(error, status=rest_status(error), media_type=_JSON), error.code
        self.metrics.observe(label, time.perf_counter() - started, code)
        return response

    async def list_jobs(self, request: Request, name_contains: str | None = None, status: str | None = None,
                        max_results: str | None = None, next_token: str | None = None,
                        sort_by: str | None = None, sort_order: str | None = None) -> Response:
        body = {k: v for k, v in {
            "NameContains": name_contains, "StatusEquals": status, "MaxResults": _int_or_raw(max_results),
            "NextToken": next_token, "SortBy": sort_by, "SortOrder": sort_order,
        }.items() if v is not None}
        return await self._run("rest.ListTrainingJobs", request, sagemaker_ops.list_training_jobs, body)

    async def describe_job(self, request: Request, name: str) -> Response:
        return await self._run("rest.DescribeTrainingJob", request, sagemaker_ops.describe_training_job,
                               {"TrainingJobName": name}, inline=True)

    async def stop_job(self, request: Request, name: str) -> Response:
        return await self._run("rest.StopTrainingJob", request, sagemaker_ops.stop_training_job,
                               {"TrainingJobName": name})

    async def healthz(self) -> Response:
        try:
            await run_in_threadpool(self.service.job_counts)
        except Exception as e:
            log.warning("health check failed: %s", e)
            return JSONResponse({"status": "unavailable", "error": f"job store: {e}"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def metrics_text(self) -> Response:
        try:
            text = await run_in_threadpool(self.metrics.render)
        except Exception as e:
            log.warning("metrics scrape failed: %s", e)
            return Response(f"job store unavailable: {e}\n", status_code=503, media_type="text/plain")
        return Response(text, media_type=self.metrics.content_type)

    def register(self, app: FastAPI) -> None:
        app.add_api_route("/v1/training-jobs", self.list_jobs, methods=["GET"], tags=["training jobs"],
                          summary="List training jobs (ListTrainingJobs JSON)")
        app.add_api_route("/v1/training-jobs/{name}", self.describe_job, methods=["GET"], tags=["training jobs"],
                          summary="Describe a training job (DescribeTrainingJob JSON)")
        app.add_api_route("/v1/training-jobs/{name}/stop", self.stop_job, methods=["POST"], tags=["training jobs"],
                          summary="Stop a training job")
        app.add_api_route("/healthz", self.healthz, methods=["GET"], tags=["operations"])
        app.add_api_route("/metrics", self.metrics_text, methods=["GET"], tags=["operations"])

