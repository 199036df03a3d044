"""``--runtime kubernetes`` from Settings (murphy.jobs.plane.make_runtime): what it needs, what it builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from murphy.exceptions import RuntimeBackendError
from murphy.jobs.plane import make_runtime
from murphy.runtimes.kubernetes import KubernetesRuntime
from murphy.settings import Settings


def test_local_buckets_are_refused_with_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeBackendError, match="--object-store s3"):
        make_runtime(Settings(data_dir=tmp_path, runtime="kubernetes", kubernetes_api_server="http://127.0.0.1:1"))


def test_settings_become_the_runtime_s_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI")
    (tmp_path / "profiles.json").write_text('{"profiles": [{"pattern": "ml.g5.*", "node_selector": {"pool": "gpu"}}]}')
    rt = make_runtime(Settings(data_dir=tmp_path, runtime="kubernetes", object_store="s3",
                               s3_endpoint_url="http://s3.internal:8333", kubernetes_api_server="http://127.0.0.1:1",
                               kubernetes_namespace="team-a", kubernetes_profiles=tmp_path / "profiles.json",
                               kubernetes_stop_grace_s=60, kubernetes_image_pull_timeout_s=42))
    assert isinstance(rt, KubernetesRuntime) and rt.name == "kubernetes"
    assert (rt.options.namespace, rt.api.namespace, rt.options.s3_endpoint_url) == ("team-a", "team-a", "http://s3.internal:8333")
    assert rt.options.stop_grace_s == 60 and rt.limits.image_pull_s == 42
    assert rt.options.profiles[0].node_selector == {"pool": "gpu"}
    assert len(rt.rid) == 8  # derived from the data directory, as the other runtimes' ids
    assert rt._credentials["AWS_ACCESS_KEY_ID"] == "AKIAEXAMPLE"
    rt.close()


def test_an_unusable_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeBackendError, match="Kubernetes configuration"):
        make_runtime(Settings(data_dir=tmp_path, runtime="kubernetes", object_store="s3", s3_endpoint_url="http://s3:1",
                              kubernetes_kubeconfig=tmp_path / "missing.yaml"))
