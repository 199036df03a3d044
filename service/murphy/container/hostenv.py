"""This host's identity in the training toolkit: which of the job's hosts this container is, and
the host-specific ``SM_*`` variables its program gets.

Every other runtime launches each host with its own environment. On Kubernetes the hosts are the
pods of one Indexed Job, made from one pod template: their environment is the same on every pod,
written for ``algo-1`` (``SM_CURRENT_HOST``, ``SM_RESOURCE_CONFIG``, ``SM_TRAINING_ENV``'s
``current_host``, ``is_master`` and ``resource_config``). What differs per pod is what the Job
controller gives it: its completion index, as ``JOB_COMPLETION_INDEX`` (and the pod's
``batch.kubernetes.io/job-completion-index`` annotation and label). ``murphy-init`` has already
written this pod's ``current_host`` into ``resourceconfig.json`` and ``murphy.json`` from it; the
toolkit derives the host from the index too (``murphy.json``'s ``cluster.host_index_env`` names
the variable), checks that the files agree, and rewrites the variables for the program, before
it starts, so that a script written for SageMaker sees its own host. SageMaker's own training
toolkit derives ``SM_*`` from ``resourceconfig.json`` the same way, so an image with it inside
gets the right values from the files alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from murphy.container.env import _env_value

#: The ``SM_*`` variables whose value depends on the host (``SM_HOSTS`` & co. do not).
HOST_VARIABLES = ("SM_CURRENT_HOST", "SM_RESOURCE_CONFIG", "SM_TRAINING_ENV")


class HostError(Exception):
    """This container cannot tell which host it is, or its files name another host."""


def host_of_index(hosts: list[str], raw: str | None, variable: str) -> str:
    """The host at 0-based completion index ``raw`` (the value of ``variable``)."""
    if raw is None or not raw.strip().isdigit():
        raise HostError(f"{variable} is {'not set' if raw is None else repr(raw)}: this pod cannot tell which of "
                        f"the job's hosts {hosts} it is (the Job must be an Indexed Job)")
    i = int(raw)
    if i >= len(hosts):
        raise HostError(f"{variable}={i}, but the job has {len(hosts)} host(s) {hosts}")
    return hosts[i]


def current_host(cluster: Mapping[str, Any] | None, resource_config: Mapping[str, Any],
                 environ: Mapping[str, str]) -> str | None:
    """This container's host: from its completion index where the runtime says so (one template
    for every host), checked against ``resourceconfig.json``; else the file's ``current_host``."""
    in_file = resource_config.get("current_host")
    variable = (cluster or {}).get("host_index_env")
    if not isinstance(variable, str) or not variable:
        return in_file if isinstance(in_file, str) else None
    hosts = [str(h) for h in (cluster or {}).get("hosts") or []]
    host = host_of_index(hosts, environ.get(variable), variable)
    if in_file != host or (cluster or {}).get("current_host") != host:
        raise HostError(f"this pod is {host} ({variable}={environ.get(variable)}), but resourceconfig.json says "
                        f"{in_file!r} and murphy.json {(cluster or {}).get('current_host')!r}: the init container "
                        "that writes this pod's host into the config files did not run")
    return host


def _decoded(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def host_environment(environ: Mapping[str, str], host: str, resource_config: Mapping[str, Any]) -> dict[str, str]:
    """The host-specific ``SM_*`` variables of ``environ`` rewritten for ``host`` (only those that
    say otherwise; none where the runtime set no ``SM_*`` at all)."""
    if "SM_CURRENT_HOST" not in environ:
        return {}
    out: dict[str, str] = {}
    if environ["SM_CURRENT_HOST"] != host:
        out["SM_CURRENT_HOST"] = host
    rc = dict(resource_config)
    if "SM_RESOURCE_CONFIG" in environ and _decoded(environ["SM_RESOURCE_CONFIG"]) != rc:
        out["SM_RESOURCE_CONFIG"] = _env_value(rc)
    training_env = _decoded(environ.get("SM_TRAINING_ENV"))
    if isinstance(training_env, dict):
        hosts = list(rc.get("hosts") or training_env.get("hosts") or [host])
        master = training_env.get("master_hostname") or hosts[0]
        mine = {**training_env, "current_host": host, "is_master": host == master, "resource_config": rc}
        if mine != training_env:
            out["SM_TRAINING_ENV"] = _env_value(mine)
    return out


def host_aliases(cluster: Mapping[str, Any] | None, host: str, fqdn: str) -> str | None:
    """glibc's ``HOSTALIASES`` file that makes every host name resolve in a Kubernetes pod.

    The pods are ``<job>-<i>.<job>`` under the namespace's domain (``cluster.addresses``); no DNS
    knows ``algo-<k>``, so a script dialling ``SM_HOSTS[0]`` itself could not resolve it. glibc
    looks a dot-less name up in the ``HOSTALIASES`` file before asking DNS, and asks for the alias
    as it is written (no search domains), so each line maps a host to its pod's fully qualified
    name: the pod's address plus what follows this pod's own address in its FQDN
    (``<ns>.svc.<cluster domain>``, from the hosts file the kubelet writes). None where the host
    comes from no completion index, or this pod's FQDN does not end in its own address (it is not
    a pod of the job's headless Service): nothing to map then.
    """
    addresses = (cluster or {}).get("addresses")
    if not isinstance(addresses, dict) or not (cluster or {}).get("host_index_env"):
        return None
    own = addresses.get(host)
    if not isinstance(own, str) or not fqdn.startswith(own + ".") or len(fqdn) == len(own) + 1:
        return None
    tail = fqdn[len(own) + 1:]
    lines = [f"{name} {address}.{tail}\n" for name, address in addresses.items()
             if isinstance(name, str) and isinstance(address, str) and "." not in name]
    return "".join(lines) or None
