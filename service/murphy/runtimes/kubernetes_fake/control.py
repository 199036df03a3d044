"""The fake's own control API under ``/fake/v1`` (not Kubernetes'), for tests and benchmarks
in another process: ``GET|POST|DELETE /fake/v1/faults`` (list, add one as JSON with the fields
of :class:`.faults.Fault`, clear), ``POST /fake/v1/compact`` (forget the watch history: resumes
get 410 Gone), ``GET|DELETE /fake/v1/requests`` (the API requests served, by verb and resource;
reset)."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
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
