"""A container's files and environment for the process runtime: SageMaker's ``/opt/ml`` under
the container directory, the ``SM_*`` variables, and the rule evaluator's ``MURPHY_*`` ones."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from murphy.container.env import (
    MURPHY_CONFIG,
    OPT_ML_ENV,
    STAGE_FILE_ENV,
    OptMl,
    resource_config,
    sm_environment,
)
from murphy.exceptions import RuntimeBackendError
from murphy.runtimes.base import RulePlan, TrainingPlan
from murphy.runtimes.catalog import CatalogEntry, resolve_argv
from murphy.runtimes.cluster import HostNetwork

#: Variables a container inherits from the service's environment (everything else comes from
#: the runtime's ``base_env`` and the job): enough to find Python, the user's AWS
#: configuration for a real S3 endpoint, the GPUs, and whether programs get a private /opt/ml
#: (MURPHY_MOUNT_NAMESPACE, murphy.container.namespace).
INHERITED = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "PYTHONPATH",
             "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CUDA_VISIBLE_DEVICES",
             "NVIDIA_VISIBLE_DEVICES", "MURPHY_MOUNT_NAMESPACE")
INHERITED_PREFIXES = ("LC_", "AWS_")
SAGEMAKER_OPT_ML = "/opt/ml/"
CONTAINER_MARKER_ENV = "MURPHY_CONTAINER"


@dataclass(frozen=True)
class ContainerView:
    """How a training container sees its layout and host."""

    opt_ml: str
    stage_file: str
    #: Variables taken from the service's own environment.
    inherited: Mapping[str, str]
    num_cpus: int
    num_gpus: int
    #: Where the job's hosts are (multi-instance jobs; None: one host, nothing to find).
    network: HostNetwork | None = None


def inherited_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in INHERITED or k.startswith(INHERITED_PREFIXES)}


def num_gpus() -> int:
    """GPUs this host exposes (``/dev/nvidia<N>``), without running ``nvidia-smi``."""
    try:
        return sum(1 for n in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", n))
    except OSError:
        return 0


def _write(path: str, doc: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)


def _local_path(opt_ml: OptMl, requested: Any) -> str:
    """``LocalPath`` on this host: SageMaker paths (``/opt/ml/...``) map into the container's
    own ``opt/ml``; the default is ``<opt_ml>/output/tensors``."""
    if not isinstance(requested, str) or not requested:
        return opt_ml.tensors_dir
    if requested.startswith(SAGEMAKER_OPT_ML):
        return os.path.join(opt_ml.root, requested[len(SAGEMAKER_OPT_ML):])
    return requested


def input_data_config(plan: TrainingPlan) -> dict[str, dict[str, str]]:
    out = {}
    for ch in plan.channels:
        # Each channel's own mode, as SageMaker writes it (FastFile channels are downloaded, as File).
        entry = {"TrainingInputMode": ch.input_mode, "S3DistributionType": ch.distribution,
                 "RecordWrapperType": ch.record_wrapper}
        if ch.compression != "None":
            entry["CompressionType"] = ch.compression
        if ch.content_type:
            entry["ContentType"] = ch.content_type
        out[ch.name] = entry
    return out


def write_training_layout(
    container_dir: str, plan: TrainingPlan, entry: CatalogEntry, python: str, base_env: Mapping[str, str],
    *, view: ContainerView | None = None, network: HostNetwork | None = None,
) -> tuple[OptMl, dict[str, str]]:
    """Create ``<container_dir>/opt/ml`` with its config files; return it and the environment.

    ``view`` is how the container sees it (a Docker container mounts it at ``/opt/ml``): paths
    written into the config files and the environment are the container's, not this host's.
    ``network`` (without a ``view``): where the job's hosts are."""
    host = OptMl(os.path.join(container_dir, "opt", "ml"))
    for d in host.layout():
        os.makedirs(d, exist_ok=True)
    view = view or ContainerView(host.root, os.path.join(container_dir, "stage.json"), inherited_env(),
                                 os.cpu_count() or 1, num_gpus(), network)
    opt_ml = OptMl(view.opt_ml)
    _write(host.config_file("hyperparameters.json"), dict(plan.hyperparameters))
    resources = resource_config(plan.instance_type, plan.current_host, plan.hosts)
    _write(host.config_file("resourceconfig.json"), resources)
    data_config = input_data_config(plan)
    _write(host.config_file("inputdataconfig.json"), data_config)
    local_path = opt_ml.tensors_dir
    hook_path = opt_ml.config_file("debughookconfig.json")
    if plan.debug_hook_config is not None:
        hook = dict(plan.debug_hook_config)
        local_path = hook["LocalPath"] = _local_path(opt_ml, hook.get("LocalPath"))
        if opt_ml.root == host.root:
            os.makedirs(local_path, exist_ok=True)
        elif local_path.startswith(opt_ml.root + os.sep):  # else: inside the container only
            os.makedirs(host.root + local_path[len(opt_ml.root):], exist_ok=True)
        _write(host.config_file("debughookconfig.json"), hook)
    tensorboard_path = None
    if plan.tensorboard_config is not None:
        tb = dict(plan.tensorboard_config)
        tensorboard_path = tb["LocalPath"] = _local_path(opt_ml, str(tb.get("LocalPath") or "/opt/ml/output/tensorboard"))
        if opt_ml.root == host.root:
            os.makedirs(tensorboard_path, exist_ok=True)
        elif tensorboard_path.startswith(opt_ml.root + os.sep):
            os.makedirs(host.root + tensorboard_path[len(opt_ml.root):], exist_ok=True)
        _write(host.config_file("tensorboardoutputconfig.json"), tb)
    _write(host.config_file(MURPHY_CONFIG), {
        "job_name": plan.job_name,
        "image": plan.image,
        "kind": entry.kind,
        "command": resolve_argv(entry.command, python) if entry.kind == "command" else [],
        "python": python,
        "tensor_uri": plan.tensor_uri,
        "output_uri": plan.output_uri,
        "local_path": local_path,
        "tensorboard_uri": plan.tensorboard_uri,
        "tensorboard_path": tensorboard_path,
        "channels": [{"name": c.name, "uri": c.uri, "data_type": c.data_type, "content_type": c.content_type,
                      "distribution": c.distribution, "input_mode": c.input_mode,
                      "record_wrapper": c.record_wrapper, "compression": c.compression,
                      "shuffle_seed": c.shuffle_seed} for c in plan.channels],
        "container_entrypoint": list(plan.container_entrypoint) if plan.container_entrypoint else None,
        "container_arguments": list(plan.container_arguments) if plan.container_arguments is not None else None,
        # Several hosts: the toolkit runs torchrun across them, uploads the model from algo-1
        # only, and leaves the trial's end marker to murphy (written once every host ended).
        "cluster": view.network.to_doc(plan.hosts, plan.current_host) if view.network is not None else None,
        "upload_model": plan.host_index == 1,
        "end_marker": len(plan.hosts) == 1,
    })
    env = {"PYTHONUNBUFFERED": "1", **view.inherited, **base_env, **plan.environment}
    env.update(sm_environment(opt_ml, plan.hyperparameters, data_config, resources, job_name=plan.job_name,
                              num_cpus=view.num_cpus, num_gpus=view.num_gpus))
    env.update({
        "TRAINING_JOB_NAME": plan.job_name,
        OPT_ML_ENV: opt_ml.root,
        STAGE_FILE_ENV: view.stage_file,
        # The real sagemaker-training toolkit, if a script imports it, finds this layout.
        "SAGEMAKER_BASE_DIR": opt_ml.root,
    })
    if view.network is not None:  # torch's env:// rendezvous, for scripts that start without torchrun
        env.update({"MASTER_ADDR": view.network.master_addr(plan.hosts), "MASTER_PORT": str(view.network.master_port)})
    if plan.debug_hook_config is not None:
        env["SMDEBUG_CONFIG_FILE_PATH"] = hook_path
    if plan.tensorboard_config is not None:
        env["TENSORBOARD_CONFIG_FILE_PATH"] = opt_ml.config_file("tensorboardoutputconfig.json")
    return host, env


def rule_env(plan: RulePlan, base_env: Mapping[str, str], inherited: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of a rule evaluator (``rule_containers/README.md``)."""
    inherited = inherited_env() if inherited is None else inherited
    env = {"PYTHONUNBUFFERED": "1", **inherited, **base_env, **plan.environment}
    env.update({
        "MURPHY_RULE_PARAMETERS": json.dumps(plan.rule_parameters),
        "MURPHY_BASE_TRIAL": plan.base_trial_uri,
        "MURPHY_RESULT_PATH": plan.result_uri,
        "MURPHY_RULE_NAME": plan.rule_name,
        "MURPHY_TRAINING_JOB_NAME": plan.job_name,
    })
    return env


def program_argv(plan: TrainingPlan | RulePlan, entry: CatalogEntry, python: str) -> list[str]:
    """What the shim starts for ``plan``."""
    if isinstance(plan, TrainingPlan):
        if entry.kind == "rule-evaluator":
            raise RuntimeBackendError(f"image {plan.image!r} is a rule evaluator; it cannot run a training job")
        return [python, "-m", "murphy.container"]
    if entry.kind == "rule-evaluator":
        return [python, "-m", "murphy.rules"]
    if entry.kind == "command":
        return resolve_argv(entry.command, python)
    raise RuntimeBackendError(f"image {plan.image!r} is a training image ({entry.kind}); it cannot evaluate rules")

