"""With ``--object-store s3`` and no ``--s3-endpoint-url`` (AWS's own S3, found the way botocore
finds it) containers still hold only their own keys: the S3 gateway forwards to AWS's regional
endpoint. Nothing here contacts AWS: the URL is asserted, and the container that runs does no S3."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from murphy.auth.s3gateway import S3Gateway
from murphy.exceptions import AccessKeyNotFound
from murphy.jobs.plane import make_runtime
from murphy.runtimes import docker_spec
from murphy.runtimes.base import SERVICE_CREDENTIAL_VARS, RulePlan
from murphy.runtimes.process import ProcessRuntime
from murphy.settings import Settings
from murphy.storage.s3 import service_endpoint
from murphy.store.memory import InMemoryJobStore

SERVICE_KEY, SERVICE_SECRET = "AKIASERVICEEXAMPLE", "service-secret-never-in-a-container"
DUMP_ENV = "import json, os; print(json.dumps(dict(os.environ)), flush=True)"


@pytest.fixture(autouse=True)
def aws_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """The service's environment as on an EC2 host: its own keys, a region, no endpoint."""
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "MURPHY_S3_ENDPOINT_URL", "AWS_PROFILE",
                "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", SERVICE_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SERVICE_SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")


@pytest.mark.parametrize(("region", "url"), [
    ("eu-west-3", "https://s3.eu-west-3.amazonaws.com"),
    ("us-east-1", "https://s3.us-east-1.amazonaws.com"),
    ("cn-north-1", "https://s3.cn-north-1.amazonaws.com.cn"),  # the aws-cn partition's DNS suffix
    ("us-gov-west-1", "https://s3.us-gov-west-1.amazonaws.com"),
    ("zz-new-9", "https://s3.zz-new-9.amazonaws.com"),  # newer than botocore's data: the aws partition
])
def test_without_an_endpoint_the_upstream_is_aws_s_regional_one(region: str, url: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", region)
    assert service_endpoint(None) == (url, region)


def test_a_configured_endpoint_is_the_upstream_signed_for_the_client_s_region(monkeypatch: pytest.MonkeyPatch) -> None:
    assert service_endpoint("http://s3.internal:8333") == ("http://s3.internal:8333", None)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://minio:9000")  # what the service's own store uses too
    assert service_endpoint(None) == ("http://minio:9000", None)


def _catalog(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"images": [{"pattern": "envdump/*", "kind": "command",
                                            "command": ["python", "-c", DUMP_ENV]}]}))
    return path


def test_process_containers_get_their_own_key_and_the_gateway(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, runtime="process", object_store="s3", image_catalog=_catalog(tmp_path))
    store = InMemoryJobStore()
    rt = make_runtime(settings, store)
    assert isinstance(rt, ProcessRuntime)
    gw = rt.credentials
    assert isinstance(gw, S3Gateway)
    assert gw.upstream.geturl() == "https://s3.eu-west-3.amazonaws.com" and gw.upstream_region == "eu-west-3"
    try:
        plan = RulePlan(container_name="j1-rule-0", job_name="j1", rule_name="r", image="envdump/x",
                        rule_parameters={}, base_trial_uri="s3://b/j1/debug-output",
                        result_uri="s3://b/j1/rule-output/r", account="111122223333")
        h = rt.launch(plan)
        deadline = time.monotonic() + 60
        while (st := rt.status(h)).phase == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (st.phase, st.exit_code) == ("exited", 0), st.log_tail
        lines = [json.loads(ev.message) for ev in rt.read_logs(h).events if ev.message.startswith("{")]
        env = lines[0]
        assert SERVICE_SECRET not in json.dumps(env) and env["AWS_ACCESS_KEY_ID"].startswith("ASIA")
        assert env["AWS_ACCESS_KEY_ID"] == h.data["s3_access_key_id"] and env["AWS_SESSION_TOKEN"]
        loopback = env["AWS_ENDPOINT_URL_S3"]
        assert loopback.startswith("http://127.0.0.1:") and env["MURPHY_S3_ENDPOINT_URL"] == loopback
        leaked = {k for k in SERVICE_CREDENTIAL_VARS if k in env} - {
            "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3",
            "MURPHY_S3_ENDPOINT_URL"}
        assert not leaked
        rt.remove(h)
        with pytest.raises(AccessKeyNotFound):  # revoked with the container
            store.get_access_key(h.data["s3_access_key_id"])
    finally:
        rt.close()


@pytest.mark.skipif(sys.platform != "linux", reason="the gateway's Unix socket")
def test_docker_containers_reach_the_gateway_not_aws(tmp_path: Path) -> None:
    from murphy.runtimes.docker import DockerRuntime

    rt = make_runtime(Settings(data_dir=tmp_path, runtime="docker", object_store="s3"), InMemoryJobStore())
    assert isinstance(rt, DockerRuntime)
    try:
        assert isinstance(rt.credentials, S3Gateway)
        assert rt.credentials.upstream.geturl() == "https://s3.eu-west-3.amazonaws.com"
        store = rt.store
        assert store.gateway_dir and Path(store.gateway_dir, docker_spec.GATEWAY_SOCKET_NAME).is_socket()
        env = docker_spec.store_env(store, "none")
        assert env["AWS_ENDPOINT_URL_S3"] == docker_spec.LOOPBACK_ENDPOINT  # the socket's loopback side
        assert "amazonaws" not in json.dumps(env)
    finally:
        rt.close()


def test_kubernetes_pods_reach_aws_s_s3_through_the_gateway_too(tmp_path: Path) -> None:
    from murphy.runtimes.kubernetes import KubernetesRuntime

    rt = make_runtime(Settings(data_dir=tmp_path, runtime="kubernetes", object_store="s3",
                               kubernetes_api_server="http://127.0.0.1:1"), InMemoryJobStore())
    assert isinstance(rt, KubernetesRuntime)
    try:
        assert isinstance(rt.keys.credentials, S3Gateway)
        assert rt.keys.credentials.upstream.geturl() == "https://s3.eu-west-3.amazonaws.com"
        assert rt.options.s3_endpoint_url.startswith("http://127.0.0.1:")  # the gateway, never AWS itself
    finally:
        rt.close()
