"""The Docker runtime's create arguments: isolation, resources, devices, environment, labels."""

from __future__ import annotations

import botocore.session
import pytest
from docker.types import DeviceRequest

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes import docker_spec as spec
from murphy.runtimes.base import RulePlan, TrainingPlan
from murphy.runtimes.docker_logs import rfc3339_ns
from murphy.runtimes.instances import instance_spec, markdown_table
from murphy.storage import gateway

HOST = spec.HostLimits(cpus=2, memory_bytes=24 << 30)
BIG_HOST = spec.HostLimits(cpus=256, memory_bytes=4096 << 30, gpus_available=True)


def training(itype: str = "ml.m5.xlarge") -> TrainingPlan:
    return TrainingPlan(container_name="j-training", job_name="j", image="img", hyperparameters={}, environment={},
                        instance_type=itype, instance_count=1, account="111122223333", region="eu-west-1")


def rule() -> RulePlan:
    return RulePlan(container_name="j-rule-0", job_name="j", rule_name="ExplodingTensor", image="r", rule_parameters={},
                    base_trial_uri="s3://b/j/debug-output", result_uri="s3://b/j/rule-output/ExplodingTensor")


def kwargs(plan: TrainingPlan | RulePlan, host: spec.HostLimits = HOST,
           store: spec.StoreAccess | None = None, **opts: object) -> dict[str, object]:
    return spec.create_kwargs(plan, image="murphy/x:latest", name="murphy-abc-j", env={"A": "1"},
                              container_dir="/data/containers/j-training",
                              store=store or spec.StoreAccess(buckets_dir="/data/buckets"), host=host,
                              options=spec.DockerOptions(**opts), rid="abc")  # type: ignore[arg-type]


def test_every_botocore_training_instance_type_has_a_spec() -> None:
    model = botocore.session.get_session().get_service_model("sagemaker")
    types = list(model.shape_for("TrainingInstanceType").enum)  # type: ignore[attr-defined]
    assert len(types) > 100
    missing = [t for t in types if instance_spec(t) is None]
    assert missing == []
    assert "not in murphy's table" not in markdown_table(types)


@pytest.mark.parametrize(("itype", "vcpus", "gib", "gpus"), [
    ("ml.m5.large", 2, 8, 0), ("ml.m5.xlarge", 4, 16, 0), ("ml.c5.9xlarge", 36, 72, 0), ("ml.r5.24xlarge", 96, 768, 0),
    ("ml.t3.medium", 2, 4, 0), ("ml.m4.10xlarge", 40, 160, 0), ("ml.p3.2xlarge", 8, 61, 1), ("ml.p3.16xlarge", 64, 488, 8),
    ("ml.g4dn.12xlarge", 48, 192, 4), ("ml.g5.48xlarge", 192, 768, 8), ("ml.p4d.24xlarge", 96, 1152, 8),
    ("ml.p5.48xlarge", 192, 2048, 8),
])
def test_instance_specs(itype: str, vcpus: int, gib: float, gpus: int) -> None:
    s = instance_spec(itype)
    assert s is not None
    assert (s.vcpus, s.memory_gib, s.accelerators if s.accelerator_kind == "gpu" else 0) == (vcpus, gib, gpus)


def test_unknown_instance_type_is_none() -> None:
    assert instance_spec("ml.z9.xlarge") is None
    assert instance_spec("m5.xlarge") is None


def test_isolation_by_default() -> None:
    kw = kwargs(training())
    assert kw["network_mode"] == "none"
    assert kw["read_only"] is True
    assert kw["cap_drop"] == ["ALL"]
    assert kw["security_opt"] == ["no-new-privileges"]
    assert kw["pids_limit"] == 1024
    assert kw["user"] == "1000:1000"
    assert kw["init"] is True
    assert kw["tmpfs"] == {"/tmp": "rw,nosuid,nodev,exec"}
    vols = kw["volumes"]
    assert vols == {
        "/data/containers/j-training/opt/ml": {"bind": "/opt/ml", "mode": "rw"},
        "/data/containers/j-training/run": {"bind": "/run/murphy", "mode": "rw"},
    }  # never the whole buckets directory: only the job's granted prefixes (test_docker_grants.py)
    mounts = {"/data/buckets/b/j/output": {"bind": "/murphy/buckets/b/j/output", "mode": "rw"}}
    kw = spec.create_kwargs(training(), image="i", name="n", env={}, container_dir="/c",
                            store=spec.StoreAccess(buckets_dir="/data/buckets"), host=HOST,
                            options=spec.DockerOptions(), rid="abc", bucket_mounts=mounts)
    assert kw["volumes"]["/data/buckets/b/j/output"] == {"bind": "/murphy/buckets/b/j/output", "mode": "rw"}
    assert "/data/buckets" not in kw["volumes"]


def test_rule_container_gets_no_opt_ml_and_gateway_read_only() -> None:
    store = spec.StoreAccess(endpoint_url="http://127.0.0.1:8333", gateway_dir="/data/containers/.gateway")
    kw = kwargs(rule(), store=store)
    assert kw["volumes"] == {"/data/containers/.gateway": {"bind": "/run/murphy-gateway", "mode": "ro"}}
    assert kw["labels"]["io.murphy.rule"] == "ExplodingTensor"  # type: ignore[index]
    assert kw["labels"]["io.murphy.role"] == "rule"  # type: ignore[index]


def test_labels_name_job_role_account_region() -> None:
    labels = kwargs(training())["labels"]
    assert labels == {
        "io.murphy.runtime": "abc", "io.murphy.container": "j-training", "io.murphy.job": "j",
        "io.murphy.role": "training", "io.murphy.account": "111122223333", "io.murphy.region": "eu-west-1",
        "io.murphy.instance-type": "ml.m5.xlarge",
    }


def test_cpu_and_memory_follow_the_instance_type_clamped_to_the_host() -> None:
    kw = kwargs(training("ml.m5.xlarge"), host=BIG_HOST)
    assert kw["nano_cpus"] == 4 * 10**9
    assert kw["mem_limit"] == kw["memswap_limit"] == 16 << 30
    assert "device_requests" not in kw
    small = kwargs(training("ml.m5.xlarge"))  # a 2-CPU host
    assert small["nano_cpus"] == 2 * 10**9
    tiny = kwargs(training("ml.m5.24xlarge"), host=spec.HostLimits(cpus=2, memory_bytes=8 << 30))
    assert tiny["mem_limit"] == 8 << 30


@pytest.mark.parametrize(("itype", "count"), [("ml.p3.2xlarge", 1), ("ml.p3.8xlarge", 4), ("ml.g5.12xlarge", 4),
                                                ("ml.p4d.24xlarge", 8), ("ml.g6e.xlarge", 1)])
def test_gpu_instance_types_request_gpus(itype: str, count: int) -> None:
    kw = kwargs(training(itype), host=BIG_HOST)
    reqs = kw["device_requests"]
    assert isinstance(reqs, list) and len(reqs) == 1
    req = reqs[0]
    assert isinstance(req, DeviceRequest)
    assert req.count == count
    assert req.capabilities == [["gpu"]]


def test_trainium_is_refused_with_a_reason() -> None:
    with pytest.raises(RuntimeBackendError, match="Neuron"):
        kwargs(training("ml.trn1.2xlarge"), host=BIG_HOST)


def test_unknown_instance_type_is_refused() -> None:
    with pytest.raises(RuntimeBackendError, match="instance table"):
        kwargs(training("ml.nope.xlarge"))


def test_store_env() -> None:
    assert spec.store_env(spec.StoreAccess(buckets_dir="/b"), "none") == {"MURPHY_S3_LOCAL_ROOT": "/murphy/buckets"}
    env = spec.store_env(spec.StoreAccess(endpoint_url="http://127.0.0.1:8333", gateway_dir="/g"), "none")
    assert env[gateway.SOCKET_ENV] == "/run/murphy-gateway/s3.sock"
    assert env["MURPHY_S3_ENDPOINT_URL"] == f"http://127.0.0.1:{gateway.DEFAULT_PORT}"
    host = spec.store_env(spec.StoreAccess(endpoint_url="https://s3.example.com"), "host")
    assert host["MURPHY_S3_ENDPOINT_URL"] == "https://s3.example.com"
    assert gateway.SOCKET_ENV not in host


def test_passed_env_keeps_credentials_not_host_paths() -> None:
    env = spec.passed_env({"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_CONFIG_FILE": "/root/.aws/c",
                           "AWS_ENDPOINT_URL": "http://x", "PATH": "/usr/bin", "HOME": "/root", "TZ": "UTC"})
    assert env == {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "TZ": "UTC"}


def test_runtime_id_depends_on_the_directory() -> None:
    assert spec.runtime_id("/a/containers") == spec.runtime_id("/a/containers/")
    assert spec.runtime_id("/a/containers") != spec.runtime_id("/b/containers")
    assert spec.container_name("abc", "j-training") == "murphy-abc-j-training"


def test_rfc3339_ns() -> None:
    assert rfc3339_ns("1970-01-01T00:00:01Z") == 10**9
    assert rfc3339_ns("1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert rfc3339_ns("1970-01-01T00:00:01.000000001Z") == 1_000_000_001
    assert rfc3339_ns("1970-01-01T01:00:00+01:00") == 0
    with pytest.raises(ValueError):
        rfc3339_ns("yesterday")


def test_docs_instance_table_is_current() -> None:
    from pathlib import Path

    model = botocore.session.get_session().get_service_model("sagemaker")
    table = markdown_table(list(model.shape_for("TrainingInstanceType").enum))  # type: ignore[attr-defined]
    doc = (Path(__file__).resolve().parents[3] / "docs" / "instance-types.md").read_text()
    assert table in doc, "regenerate docs/instance-types.md: python -m murphy.runtimes.instances"
