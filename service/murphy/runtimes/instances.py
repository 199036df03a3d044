"""What each SageMaker training instance type gives a container: vCPUs, memory, accelerators.

Every value of botocore's ``TrainingInstanceType`` enum is covered (a unit test checks it
against the installed botocore). General-purpose families follow AWS's size rule (``large`` =
2 vCPUs, ``Nxlarge`` = 4N) and a fixed memory per vCPU; accelerated types, and the few sizes
that break the rule, are listed one by one. Figures are AWS's published instance specs.
``docs/instance-types.md`` is generated from this table (``python -m murphy.runtimes.instances``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceSpec:
    vcpus: int
    memory_gib: float
    accelerators: int = 0
    #: "gpu" (NVIDIA, through the NVIDIA container runtime) or "neuron" (AWS Trainium).
    accelerator_kind: str | None = None
    accelerator_name: str = ""


#: GiB of memory per vCPU for the families that follow the size rule.
_MEMORY_PER_VCPU: dict[str, float] = {
    "m5": 4, "m6i": 4, "m7i": 4, "m7i-flex": 4, "m8i": 4, "m8i-flex": 4,
    "c5": 2, "c6i": 2, "c7i": 2, "c7i-flex": 2, "c8i": 2, "c8i-flex": 2,
    "r5": 8, "r5d": 8, "r6i": 8, "r7i": 8, "r8i": 8, "r8i-flex": 8,
    "m4": 4,
}

# (vcpus, memory GiB, accelerators) per size, for the accelerated families.
_GPU_FAMILIES: dict[str, tuple[str, dict[str, tuple[int, float, int]]]] = {
    "g4dn": ("NVIDIA T4", {
        "xlarge": (4, 16, 1), "2xlarge": (8, 32, 1), "4xlarge": (16, 64, 1), "8xlarge": (32, 128, 1),
        "12xlarge": (48, 192, 4), "16xlarge": (64, 256, 1)}),
    "g5": ("NVIDIA A10G", {
        "xlarge": (4, 16, 1), "2xlarge": (8, 32, 1), "4xlarge": (16, 64, 1), "8xlarge": (32, 128, 1),
        "16xlarge": (64, 256, 1), "12xlarge": (48, 192, 4), "24xlarge": (96, 384, 4), "48xlarge": (192, 768, 8)}),
    "g6": ("NVIDIA L4", {
        "xlarge": (4, 16, 1), "2xlarge": (8, 32, 1), "4xlarge": (16, 64, 1), "8xlarge": (32, 128, 1),
        "16xlarge": (64, 256, 1), "12xlarge": (48, 192, 4), "24xlarge": (96, 384, 4), "48xlarge": (192, 768, 8)}),
    "g6e": ("NVIDIA L40S", {
        "xlarge": (4, 32, 1), "2xlarge": (8, 64, 1), "4xlarge": (16, 128, 1), "8xlarge": (32, 256, 1),
        "16xlarge": (64, 512, 1), "12xlarge": (48, 384, 4), "24xlarge": (96, 768, 4), "48xlarge": (192, 1536, 8)}),
    "g7e": ("NVIDIA RTX PRO 6000 Blackwell", {
        "2xlarge": (8, 64, 1), "4xlarge": (16, 128, 1), "8xlarge": (32, 256, 1), "12xlarge": (48, 512, 2),
        "24xlarge": (96, 1024, 4), "48xlarge": (192, 2048, 8)}),
    "g7": ("NVIDIA RTX PRO 4500 Blackwell", {
        "2xlarge": (8, 32, 1), "4xlarge": (16, 64, 1), "8xlarge": (32, 128, 1), "12xlarge": (48, 256, 2),
        "24xlarge": (96, 512, 4), "48xlarge": (192, 1024, 8)}),
    "p2": ("NVIDIA K80", {"xlarge": (4, 61, 1), "8xlarge": (32, 488, 8), "16xlarge": (64, 732, 16)}),
    "p3": ("NVIDIA V100", {"2xlarge": (8, 61, 1), "8xlarge": (32, 244, 4), "16xlarge": (64, 488, 8)}),
    "p3dn": ("NVIDIA V100 32GB", {"24xlarge": (96, 768, 8)}),
    "p4d": ("NVIDIA A100 40GB", {"24xlarge": (96, 1152, 8)}),
    "p4de": ("NVIDIA A100 80GB", {"24xlarge": (96, 1152, 8)}),
    "p5": ("NVIDIA H100", {"4xlarge": (16, 256, 1), "48xlarge": (192, 2048, 8)}),
    "p5e": ("NVIDIA H200", {"48xlarge": (192, 2048, 8)}),
    "p5en": ("NVIDIA H200", {"48xlarge": (192, 2048, 8)}),
    "p6-b200": ("NVIDIA B200", {"48xlarge": (192, 2048, 8)}),
    "p6-b300": ("NVIDIA B300", {"48xlarge": (192, 4096, 8)}),
    "p6e-gb200": ("NVIDIA GB200", {"36xlarge": (144, 960, 4)}),
}

_NEURON_FAMILIES: dict[str, tuple[str, dict[str, tuple[int, float, int]]]] = {
    "trn1": ("AWS Trainium", {"2xlarge": (8, 32, 1), "32xlarge": (128, 512, 16)}),
    "trn1n": ("AWS Trainium", {"32xlarge": (128, 512, 16)}),
    "trn2": ("AWS Trainium2", {"48xlarge": (192, 2048, 16)}),
}

#: Sizes whose figures do not follow the family rule.
_EXCEPTIONS: dict[str, tuple[int, float]] = {
    "ml.t3.medium": (2, 4), "ml.t3.large": (2, 8), "ml.t3.xlarge": (4, 16), "ml.t3.2xlarge": (8, 32),
    "ml.c4.xlarge": (4, 7.5), "ml.c4.2xlarge": (8, 15), "ml.c4.4xlarge": (16, 30), "ml.c4.8xlarge": (36, 60),
    "ml.c5.9xlarge": (36, 72), "ml.c5.18xlarge": (72, 144),
    "ml.c5n.xlarge": (4, 10.5), "ml.c5n.2xlarge": (8, 21), "ml.c5n.4xlarge": (16, 42),
    "ml.c5n.9xlarge": (36, 96), "ml.c5n.18xlarge": (72, 192),
    "ml.m4.10xlarge": (40, 160),
}

_NAME = re.compile(r"ml\.([a-z0-9-]+)\.(medium|large|xlarge|(\d+)xlarge)")


def _vcpus(size: str, n: str | None) -> int:
    if size == "large":
        return 2
    if size == "xlarge":
        return 4
    return 4 * int(n or 0)


def instance_spec(instance_type: str) -> InstanceSpec | None:
    """The spec of ``instance_type``, or None for a name murphy does not know."""
    if instance_type in _EXCEPTIONS:
        vcpus, mem = _EXCEPTIONS[instance_type]
        return InstanceSpec(vcpus, mem)
    m = _NAME.fullmatch(instance_type)
    if m is None:
        return None
    family, size, n = m.group(1), m.group(2), m.group(3)
    for kind, families in (("gpu", _GPU_FAMILIES), ("neuron", _NEURON_FAMILIES)):
        if family in families:
            name, sizes = families[family]
            if size not in sizes:
                return None
            vcpus, mem, count = sizes[size]
            return InstanceSpec(vcpus, mem, count, kind, name)
    per_vcpu = _MEMORY_PER_VCPU.get(family)
    if per_vcpu is None or size == "medium":
        return None
    vcpus = _vcpus(size, n)
    return InstanceSpec(vcpus, vcpus * per_vcpu)


def markdown_table(instance_types: list[str]) -> str:
    """The table in ``docs/instance-types.md``."""
    rows = ["| instance type | vCPUs | memory (GiB) | accelerators |", "|---|---:|---:|---|"]
    for name in instance_types:
        spec = instance_spec(name)
        if spec is None:
            rows.append(f"| {name} | ? | ? | not in murphy's table |")
            continue
        acc = f"{spec.accelerators} x {spec.accelerator_name} ({spec.accelerator_kind})" if spec.accelerators else "none"
        rows.append(f"| {name} | {spec.vcpus} | {spec.memory_gib:g} | {acc} |")
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover - a documentation helper
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    print(markdown_table(list(model.shape_for("TrainingInstanceType").enum)))  # type: ignore[attr-defined]
