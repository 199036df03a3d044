"""Instance type -> pod resources, node selectors and tolerations (murphy.runtimes.kubernetes_resources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes import kubernetes_resources as kr


@pytest.mark.parametrize(("itype", "cpu", "cpu_limit", "memory", "gpus"), [
    ("ml.m5.large", "1500m", "2", "6144Mi", 0),  # 2 vCPU / 8 GiB: the reference's 1.5 CPU, 6 GiB
    ("ml.m5.xlarge", "3500m", "4", "14336Mi", 0),
    ("ml.t3.medium", "1500m", "2", "2048Mi", 0),
    ("ml.p3.2xlarge", "7500m", "8", "59341Mi", 1),  # 61 GiB - 5 %
    ("ml.g5.48xlarge", "180000m", "192", "747111Mi", 8),
    ("ml.p4d.24xlarge", "90000m", "96", "1120666Mi", 8),
])
def test_default_resources(itype: str, cpu: str, cpu_limit: str, memory: str, gpus: int) -> None:
    res = kr.pod_resources(itype)
    assert res.resources["requests"] == {"cpu": cpu, "memory": memory}
    limits = dict(res.resources["limits"])
    assert limits.pop("cpu") == cpu_limit and limits.pop("memory") == memory  # memory request = limit
    assert limits == ({kr.GPU_RESOURCE: str(gpus)} if gpus else {})  # GPUs in limits only
    assert kr.GPU_RESOURCE not in res.resources["requests"]
    assert res.num_gpus == gpus
    assert res.tolerations == ([kr.GPU_TOLERATION] if gpus else [])
    assert res.node_selector == {}
    spec = res.spec
    assert kr.memory_bytes(memory) < spec.memory_gib * (1 << 30)  # below the machine: allocatable is less
    assert 1 <= res.num_cpus < spec.vcpus


def test_default_instance_type_and_neuron() -> None:
    assert kr.pod_resources(None).instance_type == "ml.m5.xlarge"
    trn = kr.pod_resources("ml.trn1.32xlarge")
    assert trn.resources["limits"][kr.NEURON_RESOURCE] == "16" and trn.tolerations == [kr.NEURON_TOLERATION]
    assert trn.num_gpus == 0


def test_unknown_instance_type_is_refused() -> None:
    with pytest.raises(RuntimeBackendError, match=r"'ml\.nope\.xlarge' is not in murphy's instance table"):
        kr.pod_resources("ml.nope.xlarge")


def test_profiles_add_placement_and_may_set_the_figures() -> None:
    profiles = [
        kr.InstanceProfile("ml.g5.*", {"node.kubernetes.io/instance-type": "g5.2xlarge"},
                           [{"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}, kr.GPU_TOLERATION],
                           cpu="6", memory="28Gi"),
        kr.InstanceProfile("ml.*", {"pool": "cpu"}),
    ]
    g5 = kr.pod_resources("ml.g5.2xlarge", profiles)
    assert g5.node_selector == {"node.kubernetes.io/instance-type": "g5.2xlarge"}
    assert g5.tolerations == [kr.GPU_TOLERATION, {"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
    assert g5.resources["requests"] == {"cpu": "6", "memory": "28Gi"} and g5.resources["limits"]["memory"] == "28Gi"
    assert (g5.num_cpus, g5.memory_bytes) == (6, 28 << 30)
    m5 = kr.pod_resources("ml.m5.large", profiles)  # first match wins
    assert m5.node_selector == {"pool": "cpu"} and m5.resources["requests"]["cpu"] == "1500m"


def test_load_profiles(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"profiles": [{"pattern": "ml.p*", "node_selector": {"gpu": "yes"}, "memory": "50Gi"}]}))
    assert kr.load_profiles(f) == [kr.InstanceProfile("ml.p*", {"gpu": "yes"}, (), None, "50Gi")]
    f.write_text(json.dumps([{"pattern": "*"}]))
    assert kr.load_profiles(f) == [kr.InstanceProfile("*")]


@pytest.mark.parametrize(("doc", "message"), [
    ("{", "instance profiles .*p.json: "),
    ('{"profiles": 3}', "expected a list of profiles"),
    ('[{"node_selector": {}}]', 'entry 0: each profile is an object with a string "pattern"'),
    ('[{"pattern": "*", "nodeSelector": {}}]', r"entry 0: unknown keys \['nodeSelector'\]"),
    ('[{"pattern": "*"}, {"pattern": "*", "node_selector": {"a": 1}}]', 'entry 1: "node_selector" maps strings to strings'),
    ('[{"pattern": "*", "tolerations": {"a": 1}}]', '"tolerations" is a list of objects'),
    ('[{"pattern": "*", "cpu": 4}]', '"cpu" is a Kubernetes quantity string'),
])
def test_bad_profiles_are_clear_errors(tmp_path: Path, doc: str, message: str) -> None:
    f = tmp_path / "p.json"
    f.write_text(doc)
    with pytest.raises(RuntimeBackendError, match=message):
        kr.load_profiles(f)


@pytest.mark.parametrize(("q", "n"), [("6Gi", 6 << 30), ("512Mi", 512 << 20), ("1G", 10**9), ("1000", 1000), ("1.5Gi", 3 << 29)])
def test_memory_bytes(q: str, n: int) -> None:
    assert kr.memory_bytes(q) == n
