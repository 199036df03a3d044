"""``--runtime kubernetes`` from Settings (murphy.jobs.plane.make_runtime): what it needs, what it builds."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from murphy.auth.s3gateway import S3Gateway
from murphy.exceptions import RuntimeBackendError
from murphy.jobs.plane import make_runtime
from murphy.runtimes import kubernetes_gateway as kg
from murphy.runtimes.kubernetes import KubernetesRuntime
from murphy.settings import Settings
from murphy.store.memory import InMemoryJobStore


def test_local_buckets_are_refused_with_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeBackendError, match="--object-store s3"):
        make_runtime(Settings(data_dir=tmp_path, runtime="kubernetes", kubernetes_api_server="http://127.0.0.1:1"),
                     InMemoryJobStore())


def test_the_old_pods_endpoint_setting_is_refused_naming_the_gateway(tmp_path: Path) -> None:
    with pytest.raises(RuntimeBackendError, match="MURPHY_KUBERNETES_S3_GATEWAY_URL"):
        make_runtime(Settings(data_dir=tmp_path, runtime="kubernetes", object_store="s3", s3_endpoint_url="http://s3:1",
                              kubernetes_s3_endpoint_url="http://s3:1", kubernetes_api_server="http://127.0.0.1:1"),
                     InMemoryJobStore())


def test_settings_become_the_runtime_s_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI")
    (tmp_path / "profiles.json").write_text('{"profiles": [{"pattern": "ml.g5.*", "node_selector": {"pool": "gpu"}}]}')
    rt = make_runtime(Settings(data_dir=tmp_path, runtime="kubernetes", object_store="s3",
                               s3_endpoint_url="http://s3.internal:8333", kubernetes_api_server="http://127.0.0.1:1",
                               kubernetes_namespace="team-a", kubernetes_profiles=tmp_path / "profiles.json",
                               kubernetes_stop_grace_s=60, kubernetes_image_pull_timeout_s=42), InMemoryJobStore())
    assert isinstance(rt, KubernetesRuntime) and rt.name == "kubernetes"
    assert (rt.options.namespace, rt.api.namespace) == ("team-a", "team-a")
    assert rt.options.stop_grace_s == 60 and rt.limits.image_pull_s == 42
    assert rt.options.profiles[0].node_selector == {"pool": "gpu"}
    assert len(rt.rid) == 8  # derived from the data directory, as the other runtimes' ids
    # Outside a cluster the pods' S3 endpoint is the gateway on loopback, never S3 itself.
    assert isinstance(rt.keys.credentials, S3Gateway)
    assert rt.options.s3_endpoint_url.startswith("http://127.0.0.1:")
    port = int(rt.options.s3_endpoint_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    rt.close()
    # A restarted murphy serves it on the same port (re-attached pods keep their endpoint).
    again = make_runtime(Settings(data_dir=tmp_path, runtime="kubernetes", object_store="s3",
                                  s3_endpoint_url="http://s3.internal:8333", kubernetes_api_server="http://127.0.0.1:1"),
                         InMemoryJobStore())
    assert isinstance(again, KubernetesRuntime) and again.options.s3_endpoint_url == rt.options.s3_endpoint_url
    again.close()


def test_in_a_cluster_the_gateway_is_murphy_s_own_service(tmp_path: Path) -> None:
    ns_file = tmp_path / "namespace"
    ns_file.write_text("murphy-system\n")
    assert kg.own_namespace({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, str(ns_file)) == "murphy-system"
    assert kg.own_namespace({}, str(ns_file)) is None

    class Listener:
        def __init__(self) -> None:
            self.bound: list[tuple[str, int]] = []

        def listen_tcp(self, host: str = "127.0.0.1", port: int = 0) -> str:
            self.bound.append((host, port))
            return f"http://{host}:{port}"

    got = Listener()
    url = kg.serve(got, tmp_path, None, None, environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"},  # type: ignore[arg-type]
                   namespace_file=str(ns_file))
    assert url == "http://murphy.murphy-system.svc:8081" and got.bound == [("0.0.0.0", 8081)]
    url = kg.serve(got, tmp_path, "http://gw.example:9000", None, environ={})  # type: ignore[arg-type]
    assert url == "http://gw.example:9000" and got.bound[-1] == ("0.0.0.0", 9000)
    assert kg.serve(got, tmp_path, None, "127.0.0.2:7000", environ={}) == "http://127.0.0.2:7000"  # type: ignore[arg-type]
    with pytest.raises(RuntimeBackendError, match="GATEWAY_URL"):
        kg.serve(got, tmp_path, None, "0.0.0.0:7000", environ={})  # type: ignore[arg-type]
    with pytest.raises(RuntimeBackendError, match="host:port"):
        kg.parse_listen("8081")
    with pytest.raises(RuntimeBackendError, match="http://"):
        kg.serve(got, tmp_path, "https://gw.example", None, environ={})  # type: ignore[arg-type]


def test_an_unusable_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeBackendError, match="Kubernetes configuration"):
        make_runtime(Settings(data_dir=tmp_path, runtime="kubernetes", object_store="s3", s3_endpoint_url="http://s3:1",
                              kubernetes_kubeconfig=tmp_path / "missing.yaml"), InMemoryJobStore())
