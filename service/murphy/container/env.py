"""SageMaker's training-container contract: the ``/opt/ml`` layout, hyperparameters and ``SM_*``.

Hyperparameters arrive as a string map; like SageMaker's training toolkit
(``sagemaker_training.environment``) each value is JSON-decoded when it parses (``"100"`` → 100,
``'"train.py"'`` → ``train.py``) and kept as the string otherwise. ``sagemaker_*`` keys are the
platform's; the rest are the user's and become ``--key value`` arguments (:func:`to_cmd_args`).
Both the runtime (which sets the environment) and the in-container toolkit use this module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CURRENT_HOST = "algo-1"
NETWORK_INTERFACE = "eth0"
INSTANCE_GROUP = "homogeneousCluster"
SAGEMAKER_PREFIX = "sagemaker_"
PROGRAM_HP = "sagemaker_program"
SUBMIT_DIR_HP = "sagemaker_submit_directory"
LOG_LEVEL_HP = "sagemaker_container_log_level"
#: Platform keys that are not "additional framework parameters" (the toolkit's list).
_PLATFORM_HPS = frozenset({
    PROGRAM_HP, SUBMIT_DIR_HP, LOG_LEVEL_HP, "sagemaker_job_name", "sagemaker_region",
    "sagemaker_s3_output", "sagemaker_enable_cloudwatch_metrics",
})

OPT_ML_ENV = "MURPHY_OPT_ML"
STAGE_FILE_ENV = "MURPHY_STAGE_FILE"
MURPHY_CONFIG = "murphy.json"
END_MARKER = "training_job_end.ts"


@dataclass(frozen=True)
class OptMl:
    """The directories and files under one ``/opt/ml`` root."""

    root: str

    def _p(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def input_dir(self) -> str:
        return self._p("input")

    @property
    def config_dir(self) -> str:
        return self._p("input", "config")

    @property
    def data_dir(self) -> str:
        return self._p("input", "data")

    @property
    def model_dir(self) -> str:
        return self._p("model")

    @property
    def output_dir(self) -> str:
        return self._p("output")

    @property
    def output_data_dir(self) -> str:
        return self._p("output", "data")

    @property
    def intermediate_dir(self) -> str:
        return self._p("output", "intermediate")

    @property
    def tensors_dir(self) -> str:
        return self._p("output", "tensors")

    @property
    def failure_file(self) -> str:
        return self._p("output", "failure")

    @property
    def code_dir(self) -> str:
        return self._p("code")

    def config_file(self, name: str) -> str:
        return os.path.join(self.config_dir, name)

    def channel_dir(self, channel: str) -> str:
        return os.path.join(self.data_dir, channel)

    def stage_file(self) -> str:
        """Where the toolkit reports its stage: ``$MURPHY_STAGE_FILE``, else beside ``/opt``."""
        return os.environ.get(STAGE_FILE_ENV) or os.path.join(os.path.dirname(self.root), "stage.json")

    def layout(self) -> list[str]:
        """Every directory SageMaker creates."""
        return [self.config_dir, self.data_dir, self.model_dir, self.output_data_dir,
                self.intermediate_dir, self.tensors_dir, self.code_dir]


def decode_value(value: Any) -> Any:
    """One hyperparameter value the way the toolkit reads it: JSON if it parses, else as is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def decode_hyperparameters(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {k: decode_value(v) for k, v in raw.items()}


def split_hyperparameters(decoded: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(user, sagemaker)``: the user's hyperparameters and the ``sagemaker_*`` ones."""
    user = {k: v for k, v in decoded.items() if not k.startswith(SAGEMAKER_PREFIX)}
    platform = {k: v for k, v in decoded.items() if k.startswith(SAGEMAKER_PREFIX)}
    return user, platform


def _arg_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("latin1")
    return str(value)


def to_cmd_args(hyperparameters: Mapping[str, Any]) -> list[str]:
    """``--key value`` pairs in key order (``-k`` for one-letter keys; a mapping value becomes
    ``a=1,b=2``), exactly as the toolkit's ``mapping.to_cmd_args`` builds them."""
    args: list[str] = []
    for key in sorted(hyperparameters):
        name = _arg_text(key)
        args.append(("--" if len(name) > 1 else "-") + name if name else "")
        value = hyperparameters[key]
        if isinstance(value, Mapping):
            args.append(",".join(f"{k}={v}" for k, v in sorted(value.items())))
        else:
            args.append(_arg_text(value))
    return args


def _env_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def host_names(count: int) -> list[str]:
    """SageMaker's host names of an ``InstanceCount = count`` job: ``algo-1`` .. ``algo-<count>``."""
    return [f"algo-{i}" for i in range(1, count + 1)]


def resource_config(instance_type: str, current_host: str = CURRENT_HOST,
                    hosts: Sequence[str] = (CURRENT_HOST,)) -> dict[str, Any]:
    """``resourceconfig.json`` of ``current_host`` in a (homogeneous) cluster of ``hosts``."""
    if current_host not in hosts:
        raise ValueError(f"current host {current_host!r} is not one of {list(hosts)}")
    return {
        "current_host": current_host,
        "current_instance_type": instance_type,
        "current_group_name": INSTANCE_GROUP,
        "hosts": list(hosts),
        "instance_groups": [{"instance_group_name": INSTANCE_GROUP, "instance_type": instance_type,
                             "hosts": list(hosts)}],
        "network_interface_name": NETWORK_INTERFACE,
    }


def sm_environment(
    opt_ml: OptMl,
    hyperparameters: Mapping[str, str],
    input_data_config: Mapping[str, Any],
    resources: Mapping[str, Any],
    *,
    job_name: str,
    num_cpus: int,
    num_gpus: int,
) -> dict[str, str]:
    """The ``SM_*`` variables the training toolkit gives a script (``Environment.to_env_vars``)."""
    decoded = decode_hyperparameters(hyperparameters)
    user, platform = split_hyperparameters(decoded)
    framework = {k: v for k, v in platform.items() if k not in _PLATFORM_HPS}
    program = platform.get(PROGRAM_HP)
    entry_point = None if program is None else str(program)
    module_name = entry_point[:-3] if entry_point and entry_point.endswith(".py") else entry_point
    channels = {name: opt_ml.channel_dir(name) for name in input_data_config}
    hosts = list(resources.get("hosts", [CURRENT_HOST]))
    current_host = str(resources.get("current_host", CURRENT_HOST))
    env: dict[str, Any] = {
        "hosts": hosts,
        "network_interface_name": resources.get("network_interface_name", NETWORK_INTERFACE),
        "hps": user,
        "user_entry_point": entry_point,
        "framework_params": framework,
        "resource_config": dict(resources),
        "input_data_config": dict(input_data_config),
        "output_data_dir": opt_ml.output_data_dir,
        "channels": sorted(channels),
        "current_host": current_host,
        "current_instance_type": resources.get("current_instance_type", "local"),
        "current_instance_group": INSTANCE_GROUP,
        "current_instance_group_hosts": hosts,
        "instance_groups": [INSTANCE_GROUP],
        "instance_groups_dict": {g["instance_group_name"]: g for g in resources.get("instance_groups", [])},
        "distribution_instance_groups": [],
        "is_hetero": False,
        "module_name": module_name,
        "log_level": platform.get(LOG_LEVEL_HP, 20),
        "framework_module": None,
        "input_dir": opt_ml.input_dir,
        "input_config_dir": opt_ml.config_dir,
        "output_dir": opt_ml.output_dir,
        "num_cpus": num_cpus,
        "num_gpus": num_gpus,
        "model_dir": opt_ml.model_dir,
        "module_dir": str(platform.get(SUBMIT_DIR_HP, opt_ml.code_dir)),
        "user_args": to_cmd_args(user),
        "output_intermediate_dir": opt_ml.intermediate_dir,
    }
    env["training_env"] = {
        "additional_framework_parameters": framework,
        "channel_input_dirs": channels,
        "current_host": current_host,
        "framework_module": None,
        "hosts": hosts,
        "hyperparameters": user,
        "input_config_dir": opt_ml.config_dir,
        "input_data_config": dict(input_data_config),
        "input_dir": opt_ml.input_dir,
        "is_master": current_host == (hosts[0] if hosts else current_host),
        "job_name": job_name,
        "log_level": env["log_level"],
        "master_hostname": hosts[0] if hosts else current_host,
        "model_dir": opt_ml.model_dir,
        "module_dir": env["module_dir"],
        "module_name": module_name,
        "network_interface_name": env["network_interface_name"],
        "num_cpus": num_cpus,
        "num_gpus": num_gpus,
        "output_data_dir": opt_ml.output_data_dir,
        "output_dir": opt_ml.output_dir,
        "output_intermediate_dir": opt_ml.intermediate_dir,
        "resource_config": dict(resources),
        "user_entry_point": entry_point,
    }
    for name, path in channels.items():
        env[f"channel_{name}"] = path
    for key, value in user.items():
        env[f"hp_{key}"] = value
    return {f"SM_{key.upper()}": _env_value(value) for key, value in env.items()}


def read_json(path: str, default: Any = None) -> Any:
    """A JSON file's content, or ``default`` when it does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return default


def write_json_atomic(path: str, doc: Any) -> None:
    """Write ``doc`` so readers see the old file or all of the new one."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def argv_for(program: str, args: Sequence[str], code_dir: str, python: str) -> list[str]:
    """How the toolkit starts ``sagemaker_program`` (``entry_point_type`` rules): a package with
    ``setup.py`` → ``python -m module``; ``*.py`` → ``python program``; ``*.sh`` → ``sh program``;
    anything else is executed directly."""
    if os.path.exists(os.path.join(code_dir, "setup.py")):
        return [python, "-m", program[:-3] if program.endswith(".py") else program, *args]
    if program.endswith(".py"):
        return [python, program, *args]
    if program.endswith(".sh"):
        return ["/bin/sh", program, *args]
    return [os.path.join(".", program), *args]
