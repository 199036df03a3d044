"""Image URIs the SageMaker SDK resolves offline: Debugger rule evaluators and PyTorch training.

murphy's image catalog maps these URIs to local programs; they are computed here exactly like
the SDK (``image_uri_config/debugger.json``, ``pytorch.json``) so that a request built by
murphy.sdk is the request the stock SDK would send. Unlike the SDK, an unknown region is not an
error: built-in and custom rules then get ``murphy/rule-evaluator:latest`` (murphy's own
evaluator image, which runs both), PyTorch images the 763104351884 registry.
"""

from __future__ import annotations

import re

#: ``sagemaker-debugger-rules`` (built-in rules) registries, from the SDK's debugger.json.
RULES_REGISTRIES: dict[str, str] = {
    "af-south-1": "314341159256", "ap-east-1": "199566480951", "ap-northeast-1": "430734990657",
    "ap-northeast-2": "578805364391", "ap-northeast-3": "479947661362", "ap-south-1": "904829902805",
    "ap-southeast-1": "972752614525", "ap-southeast-2": "184798709955", "ca-central-1": "519511493484",
    "cn-north-1": "618459771430", "cn-northwest-1": "658757709296", "eu-central-1": "482524230118",
    "eu-north-1": "314864569078", "eu-south-1": "563282790590", "eu-west-1": "929884845733",
    "eu-west-2": "250201462417", "eu-west-3": "447278800020", "me-south-1": "986000313247",
    "sa-east-1": "818342061345", "us-east-1": "503895931360", "us-east-2": "915447279597",
    "us-gov-west-1": "515509971035", "us-west-1": "685455198987", "us-west-2": "895741380848",
}
#: ``sagemaker-debugger-rule-evaluator`` (custom rules) registries, from AWS's Debugger docs and the
#: SDK's own integration tests (``CUSTOM_RULE_CONTAINERS_ACCOUNTS_MAP``).
CUSTOM_RULE_REGISTRIES: dict[str, str] = {
    "ap-east-1": "645844755771", "ap-northeast-1": "670969264625", "ap-northeast-2": "326368420253",
    "ap-south-1": "552407032007", "ap-southeast-1": "631532610101", "ap-southeast-2": "445670767460",
    "ca-central-1": "105842248657", "eu-central-1": "691764027602", "eu-north-1": "091235270104",
    "eu-west-1": "606966180310", "eu-west-2": "074613877050", "eu-west-3": "224335253976",
    "me-south-1": "050406412588", "sa-east-1": "466516958431", "us-east-1": "864354269164",
    "us-east-2": "840043622174", "us-west-1": "952348334681", "us-west-2": "759209512951",
}
#: What rules run on in a region neither table knows.
FALLBACK_RULE_IMAGE = "murphy/rule-evaluator:latest"

# PyTorch training images live in 763104351884 except in these opt-in regions (pytorch.json).
_PYTORCH_REGISTRIES: dict[str, str] = {
    "af-south-1": "626614931356", "ap-east-1": "871362719292", "ap-northeast-3": "364406365360",
    "ap-south-2": "772153158452", "ap-southeast-3": "907027046896", "ap-southeast-4": "457447274322",
    "ca-west-1": "204538143572", "cn-north-1": "727897471807", "cn-northwest-1": "727897471807",
    "eu-central-2": "380420809688", "eu-south-1": "692866216735", "eu-south-2": "503227376785",
    "il-central-1": "780543022126", "me-central-1": "914824155844", "me-south-1": "217643126080",
    "us-gov-east-1": "446045086412", "us-gov-west-1": "442386744353",
}
_PYTORCH_DEFAULT_REGISTRY = "763104351884"
#: framework_version -> the py_version its images are built for (pytorch.json, training scope).
PYTORCH_PY_VERSIONS: dict[str, str] = {
    "1.8": "py36", "1.9": "py38", "1.10": "py38", "1.11": "py38", "1.12": "py38", "1.13": "py39",
    "2.0": "py310", "2.1": "py310", "2.2": "py310", "2.3": "py311", "2.4": "py311", "2.5": "py311",
    "2.6": "py312", "2.7": "py312", "2.8": "py312",
}


def ecr_uri(registry: str, region: str, repository: str, tag: str) -> str:
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{registry}.dkr.ecr.{region}.{domain}/{repository}:{tag}"


def rule_image_uri(region: str) -> str:
    """The built-in rule evaluator image (``sagemaker-debugger-rules:latest``) for ``region``."""
    registry = RULES_REGISTRIES.get(region)
    return ecr_uri(registry, region, "sagemaker-debugger-rules", "latest") if registry else FALLBACK_RULE_IMAGE


def custom_rule_image_uri(region: str) -> str:
    """The custom rule evaluator image (``sagemaker-debugger-rule-evaluator:latest``) for ``region``."""
    registry = CUSTOM_RULE_REGISTRIES.get(region)
    return ecr_uri(registry, region, "sagemaker-debugger-rule-evaluator", "latest") if registry else FALLBACK_RULE_IMAGE


def processor_for(instance_type: str) -> str:
    """``cpu`` or ``gpu`` like the SDK: GPU for the ``ml.g*``/``ml.p*`` families (and ``local_gpu``)."""
    if instance_type.startswith("local"):
        return "cpu" if instance_type == "local" else "gpu"
    m = re.match(r"^ml[._]([a-z0-9]+)", instance_type)
    if not m:
        raise ValueError(f"Invalid SageMaker instance type: {instance_type}")
    return "gpu" if m.group(1)[0] in ("g", "p") else "cpu"


def pytorch_image_uri(region: str, framework_version: str, py_version: str | None, instance_type: str) -> str:
    """``763104351884.dkr.ecr.<region>.amazonaws.com/pytorch-training:<fw>-<cpu|gpu>-<py>``; the
    tag keeps ``framework_version`` as given ("2.1" stays "2.1"), as the SDK does."""
    short = ".".join(framework_version.split(".")[:2])
    py = py_version or PYTORCH_PY_VERSIONS.get(short)
    if not py:
        raise ValueError(
            f"py_version is required for PyTorch {framework_version} (known defaults: "
            f"{', '.join(f'{k}={v}' for k, v in PYTORCH_PY_VERSIONS.items())})"
        )
    registry = _PYTORCH_REGISTRIES.get(region, _PYTORCH_DEFAULT_REGISTRY)
    return ecr_uri(registry, region, "pytorch-training", f"{framework_version}-{processor_for(instance_type)}-{py}")
