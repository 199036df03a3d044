"""The lightkube adapter (murphy.runtimes.kubernetes_lightkube) against a scripted HTTP transport:
the requests lightkube really sends for murphy's calls, and every client error mapped to murphy's
exceptions (map_error). The whole runtime against a real HTTP fake API server: tests/e2e."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes.kubernetes_client import (
    KubernetesConfigError,
    KubernetesConflict,
    KubernetesError,
    KubernetesNotFound,
)
from murphy.runtimes.kubernetes_lightkube import LightkubeApi, load_config

Handler = Callable[[httpx2.Request], httpx2.Response]


def status(code: int, reason: str, message: str) -> httpx2.Response:
    return httpx2.Response(code, json={"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                                       "reason": reason, "message": message})


def api(handler: Handler) -> LightkubeApi:
    return LightkubeApi("murphy-jobs", load_config(server="http://127.0.0.1:1"), transport=httpx2.MockTransport(handler))


CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mt-a-1-cfg", "annotations": {"x": "y"}},
      "immutable": True, "data": {"a.json": "{}"}}


def test_create_get_list_patch_delete_send_what_the_api_expects() -> None:
    seen: list[tuple[str, str, dict[str, str], Any]] = []

    def handler(req: httpx2.Request) -> httpx2.Response:
        body = json.loads(req.content) if req.content else None
        seen.append((req.method, req.url.path, dict(req.url.params), body))
        if req.method == "POST":
            return httpx2.Response(201, json={**body, "metadata": {**body["metadata"], "uid": "u-1", "namespace": "murphy-jobs"}})
        if req.method == "GET" and req.url.path.endswith("/events"):
            return httpx2.Response(200, json={"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": []})
        if req.method == "GET" and req.url.path.endswith("/pods"):
            return httpx2.Response(200, json={"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [
                {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p-1", "labels": {"a": "b"}},
                 "status": {"phase": "Running"}}]})
        if req.method == "GET":
            return status(404, "NotFound", 'jobs.batch "mt-x" not found')
        if req.method == "PATCH":
            assert req.headers["content-type"] == "application/merge-patch+json"
            return httpx2.Response(200, json={"kind": "Job", "apiVersion": "batch/v1",
                                              "metadata": {"name": "mt-x", "uid": "u-2", "annotations": body["metadata"]["annotations"]}})
        return httpx2.Response(200, json={"kind": "Status", "apiVersion": "v1", "status": "Success"})

    a = api(handler)
    created = a.create(dict(CM))
    assert created["metadata"]["uid"] == "u-1" and created["data"] == {"a.json": "{}"}
    assert seen[-1][:2] == ("POST", "/api/v1/namespaces/murphy-jobs/configmaps")
    assert a.get("Job", "mt-x") is None
    assert seen[-1][:2] == ("GET", "/apis/batch/v1/namespaces/murphy-jobs/jobs/mt-x")
    pods = a.list("Pod", labels={"murphy.io/role": "training", "app.kubernetes.io/managed-by": "murphy"})
    assert pods[0]["metadata"]["name"] == "p-1" and pods[0]["status"]["phase"] == "Running"
    assert set(seen[-1][2]["labelSelector"].split(",")) == {"murphy.io/role=training", "app.kubernetes.io/managed-by=murphy"}
    a.list("Event", fields={"involvedObject.uid": "u-1"})
    assert seen[-1][2]["fieldSelector"] == "involvedObject.uid=u-1"
    patched = a.patch_annotations("Job", "mt-x", {"murphy.io/stop-reason": "stop-requested"})
    assert patched is not None and patched["metadata"]["annotations"] == {"murphy.io/stop-reason": "stop-requested"}
    assert a.delete("Job", "mt-x") is True
    assert seen[-1][:3] == ("DELETE", "/apis/batch/v1/namespaces/murphy-jobs/jobs/mt-x", {"propagationPolicy": "Foreground"})
    a.delete("Pod", "p-1", propagation="Background", grace_s=0)
    assert seen[-1][2] == {"propagationPolicy": "Background", "gracePeriodSeconds": "0"}
    assert a.requests == 7


def test_pod_log_asks_for_since_time_and_timestamps() -> None:
    seen: list[httpx2.Request] = []

    def handler(req: httpx2.Request) -> httpx2.Response:
        seen.append(req)
        return httpx2.Response(200, text="2026-12-01T10:00:00.1Z a\n2026-12-01T10:00:01.2Z b\n")

    lines = list(api(handler).pod_log("p-1", "algo", since_time="2026-12-01T10:00:00Z", follow=True))
    assert lines == ["2026-12-01T10:00:00.1Z a", "2026-12-01T10:00:01.2Z b"]
    assert seen[0].url.path == "/api/v1/namespaces/murphy-jobs/pods/p-1/log"
    assert dict(seen[0].url.params) == {"container": "algo", "timestamps": "true", "follow": "true",
                                        "sinceTime": "2026-12-01T10:00:00Z"}


@pytest.mark.parametrize(("response", "kind", "text", "retryable"), [
    (status(409, "AlreadyExists", 'configmaps "mt-a-1-cfg" already exists'), KubernetesConflict, r"already exists \(409 AlreadyExists\)", False),
    (status(403, "Forbidden", 'configmaps is forbidden: User "system:serviceaccount:murphy:murphy" cannot create'),
     KubernetesError, "lacks a permission of the murphy-runtime Role", False),
    (status(422, "Invalid", 'ConfigMap "mt-a-1-cfg" is invalid: metadata.name: Invalid value'), KubernetesError, "is invalid", False),
    (status(429, "TooManyRequests", "rate limited"), KubernetesError, "rate limited", True),
    (status(500, "InternalError", "etcdserver: request timed out"), KubernetesError, "etcdserver", True),
    (httpx2.Response(502, text="<html>bad gateway</html>", headers={"content-type": "text/html"}), KubernetesError, "HTTP 502", True),
])
def test_api_errors_are_mapped(response: httpx2.Response, kind: type[Exception], text: str, retryable: bool) -> None:
    a = api(lambda req: response)
    with pytest.raises(kind, match=text) as err:
        a.create(dict(CM))
    assert isinstance(err.value, RuntimeBackendError) and isinstance(err.value, KubernetesError)
    assert err.value.retryable is retryable


def test_a_missing_pod_log_is_not_found() -> None:
    with pytest.raises(KubernetesNotFound):
        list(api(lambda req: status(404, "NotFound", 'pods "p" not found')).pod_log("p", "algo"))


def test_transport_errors_are_mapped() -> None:
    def refuse(req: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=req)

    def slow(req: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("timed out", request=req)

    with pytest.raises(KubernetesError, match="cannot reach the API server") as err:
        api(refuse).get("Job", "x")
    assert err.value.retryable
    with pytest.raises(KubernetesError, match="timed out"):
        api(slow).list("Pod")


def test_configuration_errors_are_mapped(tmp_path: Any) -> None:
    with pytest.raises(KubernetesConfigError, match="Kubernetes configuration"):
        load_config(kubeconfig=str(tmp_path / "nope.yaml"))
    (tmp_path / "kc.yaml").write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    with pytest.raises(KubernetesConfigError):
        load_config(kubeconfig=str(tmp_path / "kc.yaml"), context="prod")
