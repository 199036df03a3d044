"""Distributed launch in the training toolkit: ``torchrun`` for the SDK's ``torch_distributed``.

``PyTorch(..., distribution={"torch_distributed": {"enabled": True}})`` (SageMaker Python SDK 2.x)
sends the hyperparameter ``sagemaker_torch_distributed_enabled=true``; SageMaker's training
toolkit then starts, on every host, ``torchrun --nnodes N --nproc_per_node P [--master_addr algo-1
--master_port 7777 --node_rank i] program args`` (P: the host's GPUs, else 1), so a
``torch.distributed`` script reads ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` ... as there. This
module builds the same command from ``murphy.json``'s ``cluster`` entry (written by the runtime,
see :mod:`murphy.runtimes.cluster`), with ``python -m torch.distributed.run`` so the program's
own interpreter runs it. Anything else runs the plain per-host script.

Differences from SageMaker, all about hosts sharing one machine: the master address is an
address when the host names do not resolve (the process runtime), and a one-host job gets a
free ``--master_port`` on ``127.0.0.1`` (SageMaker gives none: its instance is the job's own,
while processes of two murphy jobs would both take torchrun's default 29500).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from murphy.core.ports import free_port

TORCH_DISTRIBUTED_HP = "sagemaker_torch_distributed_enabled"


class DistributedError(Exception):
    """The job asks for a distributed launch the toolkit cannot make."""


def torch_distributed(platform: Mapping[str, Any]) -> bool:
    value = platform.get(TORCH_DISTRIBUTED_HP)
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def processes_per_host(environ: Mapping[str, str]) -> int:
    """One worker per GPU (``SM_NUM_GPUS``), else one, as SageMaker's toolkit does."""
    try:
        gpus = int(environ.get("SM_NUM_GPUS") or 0)
    except ValueError:
        gpus = 0
    return max(1, gpus)


def torchrun_argv(python: str, program: str, args: Sequence[str], cluster: Mapping[str, Any] | None,
                  nproc: int) -> list[str]:
    """The ``torchrun`` command of this host (see the module docstring)."""
    if not program.endswith(".py"):
        raise DistributedError("torch_distributed runs a Python script (*.py) entry point only, "
                               f"as SageMaker's toolkit does; got {program!r}")
    cluster = cluster or {}
    hosts = [str(h) for h in cluster.get("hosts") or ["algo-1"]]
    current = str(cluster.get("current_host") or hosts[0])
    if current not in hosts:
        raise DistributedError(f"murphy.json: current host {current!r} is not one of {hosts}")
    argv = [python, "-m", "torch.distributed.run", "--nnodes", str(len(hosts)), "--nproc_per_node", str(nproc)]
    if len(hosts) > 1:
        argv += ["--master_addr", str(cluster.get("master_addr") or hosts[0]),
                 "--master_port", str(cluster.get("master_port") or 7777),
                 "--node_rank", str(hosts.index(current))]
    else:
        argv += ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    return [*argv, program, *args]


def launch_argv(argv: list[str], program: str, platform: Mapping[str, Any], config: Mapping[str, Any],
                python: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """``argv`` (the plain script-mode command, ``[python, program, *args]``) or the torchrun
    command that replaces it when the job asks for ``torch_distributed``."""
    if not torch_distributed(platform):
        return argv
    if argv[:2] != [python, program]:  # a package (setup.py): SageMaker refuses it too
        raise DistributedError("torch_distributed does not run Python packages (a setup.py in the source); "
                               "use a Python script as the entry point, as on SageMaker")
    cluster = config.get("cluster")
    return torchrun_argv(python, program, argv[2:], cluster if isinstance(cluster, Mapping) else None,
                         processes_per_host(os.environ if environ is None else environ))
