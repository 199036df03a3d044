"""How the hosts of a multi-instance training job find each other on one machine.

SageMaker gives each host its own instance, named ``algo-1`` .. ``algo-N`` in DNS, and its
toolkit starts ``torchrun`` with ``--master_addr algo-1 --master_port 7777``. murphy's hosts
share one machine:

- **process runtime**: every host is a process tree in the host's own network; ``algo-<i>`` is
  the loopback address ``127.0.0.<i>`` (Linux routes all of ``127.0.0.0/8`` to ``lo``), and since
  torch's rendezvous store listens on every address, each job gets its own master port, picked
  free when its first host is launched and kept in ``<algo-1's container dir>/cluster.json``.
  The names do not resolve there (the machine's ``/etc/hosts`` is not murphy's): the toolkit
  passes addresses, and the environment has ``MASTER_ADDR`` / ``MASTER_PORT``.
- **Docker runtime** (network ``none``): hosts 2..N join ``algo-1``'s network namespace, which
  has nothing but ``lo`` (no route out, as for one host); a per-job ``hosts`` file mounted at
  ``/etc/hosts`` makes ``algo-<i>`` resolve to ``127.0.0.<i>``, and the master port is
  SageMaker's 7777 (the namespace is the job's own). See docs/runtimes.md for why not a
  Docker network.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from murphy.core.ports import free_port

SAGEMAKER_MASTER_PORT = 7777
CLUSTER_FILE = "cluster.json"
HOSTS_FILE = "hosts"


@dataclass(frozen=True)
class HostNetwork:
    """Where the job's hosts are, as one host sees them."""

    #: ``algo-<i>`` -> its address.
    addresses: dict[str, str] = field(default_factory=dict)
    master_port: int = SAGEMAKER_MASTER_PORT
    #: Whether the names resolve inside the container (a hosts file there names them).
    names_resolve: bool = False

    def master_addr(self, hosts: Sequence[str]) -> str:
        first = hosts[0]
        return first if self.names_resolve else self.addresses.get(first, "127.0.0.1")

    def to_doc(self, hosts: Sequence[str], current_host: str) -> dict[str, object]:
        """The ``cluster`` entry of ``murphy.json`` (read by :mod:`murphy.container.distributed`)."""
        return {"hosts": list(hosts), "current_host": current_host, "addresses": dict(self.addresses),
                "master_addr": self.master_addr(hosts), "master_port": self.master_port}


def loopback_addresses(hosts: Sequence[str]) -> dict[str, str]:
    """``algo-<i>`` -> ``127.0.0.<i>`` (at most 254 hosts; Settings caps far lower)."""
    if len(hosts) > 254:
        raise ValueError(f"{len(hosts)} hosts do not fit in 127.0.0.1-254")
    return {h: f"127.0.0.{i}" for i, h in enumerate(hosts, 1)}


def hosts_file(addresses: dict[str, str]) -> str:
    """``/etc/hosts`` of a container whose hosts share one loopback."""
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    lines += [f"{addr}\t{host}" for host, addr in addresses.items()]
    return "\n".join(lines) + "\n"


def shared_master_port(first_host_dir: str) -> int:
    """The job's master port: the one in ``cluster.json`` of its first host's directory, or a
    free one written there (atomically: concurrent launches of two hosts agree on it)."""
    path = os.path.join(first_host_dir, CLUSTER_FILE)
    os.makedirs(first_host_dir, exist_ok=True)
    with contextlib.suppress(FileNotFoundError, ValueError, KeyError, TypeError), open(path, encoding="utf-8") as f:
        return int(json.load(f)["master_port"])
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"master_port": free_port()}, f)
    try:
        os.link(tmp, path)  # the first writer wins
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    with open(path, encoding="utf-8") as f:
        return int(json.load(f)["master_port"])


def container_network(hosts: Sequence[str], container_dir: str, first_host_dir: str,
                      docker_network: str) -> HostNetwork | None:
    """A Docker host's view of its job's hosts, with the hosts file (``<container_dir>/hosts``)
    that is mounted at ``/etc/hosts``; None for one host. ``docker_network`` ``none``: the hosts
    share a network namespace of the job's own (SageMaker's port); else (``host``) the host's
    network (a port per job, as for processes)."""
    if len(hosts) < 2:
        return None
    addresses = loopback_addresses(hosts)
    with open(os.path.join(container_dir, HOSTS_FILE), "w", encoding="utf-8") as f:
        f.write(hosts_file(addresses))
    port = SAGEMAKER_MASTER_PORT if docker_network == "none" else shared_master_port(first_host_dir)
    return HostNetwork(addresses, port, names_resolve=True)
