"""The fake's own control API under ``/fake/v1`` (not Kubernetes'), for tests and benchmarks
in another process: ``GET|POST|DELETE /fake/v1/faults`` (list, add one as JSON with the fields
of :class:`.faults.Fault`, clear), ``POST /fake/v1/compact`` (forget the watch history: resumes
get 410 Gone), ``GET|DELETE /fake/v1/requests`` (the API requests served, by verb and resource;
reset), ``POST|DELETE /fake/v1/errors`` (make the next matching requests fail with a status code,
e.g. 429, 500, 403, and/or answer late: :class:`InjectedError`), ``POST
/fake/v1/rotate-logs[?namespace=&pod=]`` (end the open ``follow`` log streams, as a log rotation
does: the client must reconnect and resume without duplicates)."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from murphy.runtimes.kubernetes_fake.errors import ApiStatusError, bad_request

if TYPE_CHECKING:
    from murphy.runtimes.kubernetes_fake.cluster import FakeCluster

_NAMESPACED = re.compile(r"^/api(?:s/[^/]+)?/v1/namespaces/[^/]+/([^/]+)(?:/[^/]+(/[^/]+)?)?$")


class RequestCounter:
    """API requests by ``"<METHOD> <resource>[/<subresource>]"`` (names and namespaces left out)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def count(self, method: str, path: str) -> None:
        m = _NAMESPACED.match(path)
        if m:
            key = f"{method} {m.group(1)}{m.group(2) or ''}"
        elif path.startswith("/fake/"):
            return
        else:
            key = f"{method} {path}"
        with self._lock:
            self._counts[key] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
            429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


@dataclass
class InjectedError:
    """The next ``times`` requests matching ``method`` and ``path_contains`` get ``code`` (0: none,
    only ``delay_s``) after ``delay_s`` seconds."""

    code: int = 500
    method: str | None = None
    path_contains: str | None = None
    times: int = 1
    delay_s: float = 0.0
    message: str | None = None

    def status(self) -> ApiStatusError:
        reason = _REASONS.get(self.code, "InternalError")
        message = self.message or {429: "Too many requests, please try again later.",
                                   403: 'jobs.batch is forbidden: User "system:serviceaccount:murphy:murphy" cannot create '
                                        'resource "jobs" in API group "batch"'}.get(self.code, "Internal error occurred: injected by the test")
        return ApiStatusError(self.code, reason, message)


class ErrorInjector:
    def __init__(self) -> None:
        self._rules: list[InjectedError] = []
        self._lock = threading.Lock()

    def add(self, **kw: Any) -> InjectedError:
        rule = InjectedError(**kw)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def take(self, method: str, path: str) -> InjectedError | None:
        with self._lock:
            for rule in self._rules:
                if rule.times > 0 and (rule.method in (None, method)) and (not rule.path_contains or rule.path_contains in path):
                    rule.times -= 1
                    return rule
        return None


class Control:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    async def handle(self, request: Request, parts: list[str]) -> Response:
        if parts[:1] != ["v1"] or len(parts) != 2:
            raise ApiStatusError(404, "NotFound", "no such fake control endpoint")
        what, method = parts[1], request.method
        if what == "faults":
            if method == "GET":
                return _json([f.describe() for f in self.cluster.faults.rules()])
            if method == "POST":
                try:
                    doc: Any = json.loads(await request.body())
                    fault = self.cluster.faults.add(**doc)
                except (ValueError, TypeError) as e:
                    raise bad_request(f"a fault is a JSON object with kind, selector, name_prefix, container, "
                                      f"after_s, message, times: {e}") from e
                return _json(fault.describe(), 201)
            if method == "DELETE":
                self.cluster.faults.clear()
                return _json({})
        if what == "errors":
            if method == "POST":
                try:
                    rule = self.cluster.errors.add(**json.loads(await request.body()))
                except (ValueError, TypeError) as e:
                    raise bad_request(f"an injected error is a JSON object with code, method, path_contains, times, "
                                      f"delay_s, message: {e}") from e
                return _json(dataclasses.asdict(rule), 201)
            if method == "DELETE":
                self.cluster.errors.clear()
                return _json({})
        if what == "rotate-logs" and method == "POST":
            q = request.query_params
            return _json({"rotated": self.cluster.kubelet.rotate_logs(q.get("namespace"), q.get("pod"))})
        if what == "compact" and method == "POST":
            self.cluster.store.compact()
            return _json({"compactedResourceVersion": str(self.cluster.store.compacted_rv)})
        if what == "requests":
            if method == "GET":
                return _json({"total": self.cluster.requests.total(), "by": self.cluster.requests.snapshot()})
            if method == "DELETE":
                self.cluster.requests.reset()
                return _json({})
        raise ApiStatusError(405, "MethodNotAllowed", f"{method} is not allowed on /fake/v1/{what}")


def _json(doc: Any, status: int = 200) -> Response:
    return Response(json.dumps(doc), status_code=status, media_type="application/json")
