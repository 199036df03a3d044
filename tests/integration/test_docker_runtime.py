"""DockerRuntime only: isolation, resources, OOM, GPU and image refusals, and S3 through the
gateway. The contract both runtimes keep is in test_runtimes_common.py.

Needs dockerd and `make images-cpu` (the `docker_engine` fixture skips without them locally and
fails in CI).
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runtime_support import TRAIN_PY, DockerEnv, FakeCredentials, script_plan, tarball

import servers
from murphy.runtimes.base import Channel
from murphy.runtimes.catalog import ImageCatalog
from murphy.runtimes.docker import DockerRuntime
from murphy.runtimes.docker_spec import StoreAccess

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, docker_engine: Any) -> Iterator[DockerEnv]:
    e = DockerEnv(tmp_path_factory.mktemp("docker-runtime"), docker_engine)
    yield e
    e.close()


def output_file(env: DockerEnv, name: str, member: str) -> Any:
    with tarfile.open(env.bucket(f"out/{name}/output/output.tar.gz")) as tar:
        return json.loads(tar.extractfile(member).read())  # type: ignore[union-attr]


# ---- isolation, resources, refusals ----------------------------------------------------------


def test_containers_are_isolated(env: DockerEnv) -> None:
    h = env.launch(env.script_plan("sm-probe", "probe", instance_type="ml.m5.large"))
    st = env.wait(h)
    assert (st.phase, st.exit_code) == ("exited", 0), st.log_tail
    facts = output_file(env, "sm-probe", "probe.json")
    assert facts["uid"] == 1000 and facts["gid"] == 1000
    assert facts["nets"] == ["lo"]  # no network at all
    assert facts["internet"] is False
    assert facts["root_writable"] is False
    assert facts["CapEff"] == "0000000000000000"
    assert facts["NoNewPrivs"] == "1"
    host = env.client.api.inspect_container(h.id)["HostConfig"]
    assert host["ReadonlyRootfs"] is True and host["NetworkMode"] == "none" and host["PidsLimit"] == 1024
    assert host["Memory"] == min(8 << 30, env.rt.host().memory_bytes)  # ml.m5.large: 2 vCPUs, 8 GiB
    assert host["NanoCpus"] == min(2, env.rt.host().cpus) * 10**9
    assert facts["cpus"] == str(min(2, env.rt.host().cpus))


def test_out_of_memory_is_reported(env: DockerEnv) -> None:
    rt = env.runtime(max_memory_bytes=256 << 20)
    h = env.launch(env.script_plan("sm-oom", "oom"), rt=rt)
    st = env.wait(h, rt=rt)
    assert st.phase == "exited" and st.exit_code == 137, st.log_tail
    assert st.failure is not None and st.failure.startswith("OutOfMemoryError") and "0.25 GiB" in st.failure


def test_gpu_instance_type_on_a_host_without_gpus_fails_at_launch(env: DockerEnv) -> None:
    if env.rt.host().gpus_available:
        pytest.skip("this Docker host has the NVIDIA runtime")
    from murphy.exceptions import RuntimeBackendError

    with pytest.raises(RuntimeBackendError, match=r"ml\.p3\.2xlarge asks for GPUs.*docs/gpu.md"):
        env.rt.launch(env.script_plan("sm-gpu", "ok", instance_type="ml.p3.2xlarge"))
    assert env.client.containers.list(all=True, filters={"name": "sm-gpu"}) == []


def test_unknown_image_is_refused_with_how_to_build(env: DockerEnv) -> None:
    from murphy.exceptions import RuntimeBackendError

    with pytest.raises(RuntimeBackendError, match=r"acme/trainer:1.*make images"):
        env.rt.launch(env.script_plan("unknown", "ok", image="acme/trainer:1"))


# ---- a launch cut short between the engine's create and start (issue 14) ---------------------


class _Died(BaseException):
    """The service dying mid-launch: nothing of murphy's may catch it."""


def _created_not_started(env: DockerEnv, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from docker.models.containers import Container

    def die(self: Container, **kwargs: Any) -> None:
        raise _Died

    with monkeypatch.context() as m:
        m.setattr(Container, "start", die)
        with pytest.raises(_Died):
            env.rt.launch(env.script_plan(name, "sleep"))


def test_a_container_created_but_never_started_is_listed_pending_and_stop_removes_it(
        env: DockerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    _created_not_started(env, "sm-created", monkeypatch)
    [found] = env.rt.list_containers("sm-created")
    assert (found.phase, found.live, found.container_name, found.role) == ("pending", True, "sm-created", "training")
    assert env.rt.status(found.handle).phase == "pending"
    env.rt.stop(found.handle)  # never to start now
    assert env.rt.list_containers("sm-created") == [] and env.rt.status(found.handle).phase == "missing"


def test_launching_a_created_container_again_starts_it(env: DockerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    _created_not_started(env, "sm-created-2", monkeypatch)
    [found] = env.rt.list_containers("sm-created-2")
    h = env.launch(env.script_plan("sm-created-2", "sleep"))
    assert h.id == found.handle.id
    env.wait_log(h, "ready")
    env.rt.stop(h, force=True)
    assert env.gone(h)


# ---- per-container S3 keys ------------------------------------------------------------------


def test_removing_a_container_found_by_listing_revokes_its_key(env: DockerEnv) -> None:
    """An orphan (its job record gone, or a restarted service sweeping) is known only from the
    engine's listing: its handle must carry the container's key, or removing it leaves the key live."""
    creds = FakeCredentials()

    def keyed() -> DockerRuntime:
        return DockerRuntime(env.root, ImageCatalog(), StoreAccess(buckets_dir=str(env.buckets)), credentials=creds)

    h = env.launch(env.script_plan("sm-orphan-key", "sleep"), rt=keyed())
    [key] = creds.issued
    restarted = keyed()
    [found] = restarted.list_containers("sm-orphan-key")
    assert found.handle.id == h.id and found.handle.data["s3_access_key_id"] == key
    restarted.remove(found.handle)
    assert creds.revoked == [key] and restarted.list_containers("sm-orphan-key") == []


# ---- a real S3 endpoint through the gateway --------------------------------------------------


@pytest.mark.s3
def test_containers_reach_s3_through_the_gateway_only(tmp_path: Path, docker_engine: Any,
                                                       seaweedfs_server: servers.S3Server,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = servers.new_bucket(seaweedfs_server)
    s3 = seaweedfs_server.client()
    s3.put_object(Bucket=bucket, Key="src/sourcedir.tar.gz", Body=tarball({"train.py": TRAIN_PY}))
    s3.put_object(Bucket=bucket, Key="data/train/a.csv", Body=b"1\n")
    s3.put_object(Bucket=bucket, Key="data/train/sub/b.csv", Body=b"2\n")
    s3.put_object(Bucket=bucket, Key="data/one.csv", Body=b"3\n")
    for k, v in seaweedfs_server.env().items():
        monkeypatch.setenv(k, v)
    rt = DockerRuntime(tmp_path / "containers", ImageCatalog(), StoreAccess(endpoint_url=seaweedfs_server.endpoint_url))
    try:
        plan = script_plan(
            "s3-ok", "ok", **DockerEnv.plan_defaults, output_uri=f"s3://{bucket}/out/s3-ok/output",
            tensor_uri=f"s3://{bucket}/debug/s3-ok/debug-output", debug_hook_config={"S3OutputPath": f"s3://{bucket}/debug"},
            channels=(Channel("train", f"s3://{bucket}/data/train"), Channel("one", f"s3://{bucket}/data/one.csv")),
            hyperparameters={"sagemaker_program": '"train.py"', "mode": '"ok"', "epochs": "2",
                             "sagemaker_submit_directory": json.dumps(f"s3://{bucket}/src/sourcedir.tar.gz")},
        )
        h = rt.launch(plan)
        deadline = time.monotonic() + 120
        while (st := rt.status(h)).phase in ("running", "pending") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (st.phase, st.exit_code, st.failure) == ("exited", 0, None), st.log_tail
        body = s3.get_object(Bucket=bucket, Key="out/s3-ok/output/output.tar.gz")["Body"].read()
        with tarfile.open(fileobj=io.BytesIO(body)) as tar:
            seen = json.loads(tar.extractfile("seen.json").read())  # type: ignore[union-attr]
        assert seen["files"] == ["a.csv", "sub/b.csv"] and seen["one"] == ["one.csv"]
        assert seen["hook"] == "/opt/ml/input/config/debughookconfig.json"
        s3.head_object(Bucket=bucket, Key="debug/s3-ok/debug-output/training_job_end.ts")
        s3.head_object(Bucket=bucket, Key="out/s3-ok/output/model.tar.gz")
        assert docker_engine.api.inspect_container(h.id)["HostConfig"]["NetworkMode"] == "none"
        rt.remove(h)
    finally:
        rt.close()
