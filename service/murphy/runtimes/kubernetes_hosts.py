"""SageMaker's host contract for a multi-instance job on Kubernetes (pure functions).

The N hosts ``algo-1`` .. ``algo-N`` are the pods of one Indexed Job: completion index ``i`` is
host ``algo-<i+1>``. Every pod is made from one template, environment included, so the config
files in the anchor and the environment are written for ``algo-1`` and name every host
(``resourceconfig.json``'s ``hosts``, ``murphy.json``'s ``cluster``, ``SM_HOSTS``). What the Job
controller gives each pod is its index (``JOB_COMPLETION_INDEX``, the
``batch.kubernetes.io/job-completion-index`` annotation and label, the hostname ``<job>-<i>``):
``murphy-init`` makes the files this pod's (``current_host``, and which host uploads the model)
from it before the training container starts, and the toolkit in the training container
(:mod:`murphy.container.hostenv`, told by ``cluster.host_index_env``) derives the host from it
too and rewrites ``SM_CURRENT_HOST``, ``SM_RESOURCE_CONFIG`` and ``SM_TRAINING_ENV`` for the
program.

Host names do not resolve on a cluster (``algo-1`` is no pod's DNS name); the pods do, as
``<job>-<i>.<job>`` through the headless Service (the pod's ``subdomain``, and the hostname the
Job controller sets), so ``cluster.addresses`` maps each host to that name and
``cluster.master_addr`` / ``MASTER_ADDR`` is ``algo-1``'s, with SageMaker's master port: the
toolkit's ``torchrun`` rendezvous at it, and gloo/NCCL bind to the pod's own hostname.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from murphy.runtimes import kubernetes_names as kn
from murphy.runtimes.base import TrainingPlan

MASTER_PORT = 7777
INDEX_ENV = "JOB_COMPLETION_INDEX"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"

#: Run by ``murphy-init`` (the utility image has Python): this pod's host in the copied files.
PATCH_SCRIPT = """\
import json, os, sys
d = sys.argv[1]
i = int(os.environ["JOB_COMPLETION_INDEX"])
host = "algo-%d" % (i + 1)
def edit(name, change):
    p = os.path.join(d, name)
    with open(p) as f:
        doc = json.load(f)
    change(doc)
    with open(p, "w") as f:
        json.dump(doc, f)
edit("resourceconfig.json", lambda doc: doc.update(current_host=host))
def murphy(doc):
    doc.setdefault("cluster", {})["current_host"] = host
    doc["upload_model"] = i == 0
edit("murphy.json", murphy)
"""


def host_count(plan: TrainingPlan) -> int:
    return max(1, plan.instance_count, len(getattr(plan, "hosts", ()) or ()))


def host_names(count: int) -> list[str]:
    return [f"algo-{i}" for i in range(1, count + 1)]


def pod_dns(rid: str, plan: TrainingPlan, index: int) -> str:
    """The DNS name of the pod with completion ``index`` (0-based) in the job's namespace."""
    job = kn.training_name(rid, plan)
    return f"{job}-{index}.{job}"


def cluster_doc(rid: str, plan: TrainingPlan) -> dict[str, object]:
    hosts = host_names(host_count(plan))
    addresses = {h: pod_dns(rid, plan, i) for i, h in enumerate(hosts)}
    # host_index_env: the toolkit takes this pod's host from its completion index (one template).
    return {"hosts": hosts, "current_host": hosts[0], "addresses": addresses, "master_addr": addresses[hosts[0]],
            "master_port": MASTER_PORT, "host_index_env": INDEX_ENV}


def cluster_files(files: Mapping[str, str], rid: str, plan: TrainingPlan) -> dict[str, str]:
    """``files`` (written for one host) naming every host, ``algo-1`` current."""
    out = dict(files)
    n = host_count(plan)
    if n == 1:
        return out
    hosts = host_names(n)
    if "resourceconfig.json" in out:
        rc = json.loads(out["resourceconfig.json"])
        rc.update(current_host=hosts[0], hosts=hosts)
        for group in rc.get("instance_groups") or []:
            group["hosts"] = hosts
        out["resourceconfig.json"] = json.dumps(rc, indent=2, sort_keys=True)
    if "murphy.json" in out:
        doc = json.loads(out["murphy.json"])
        doc["cluster"] = cluster_doc(rid, plan)
        doc["upload_model"] = True
        doc["end_marker"] = False  # murphy writes it once every host ended
        out["murphy.json"] = json.dumps(doc, indent=2, sort_keys=True)
    return out


def cluster_env(env: Mapping[str, str], rid: str, plan: TrainingPlan) -> dict[str, str]:
    """The training container's environment with torch's ``env://`` rendezvous at ``algo-1``'s pod."""
    out = dict(env)
    n = host_count(plan)
    if n == 1:
        return out
    doc = cluster_doc(rid, plan)  # SM_HOSTS is the layout's: the plan names every host
    out["MASTER_ADDR"] = str(doc["master_addr"])
    out["MASTER_PORT"] = str(MASTER_PORT)
    return out


def index_env() -> dict[str, object]:
    """``JOB_COMPLETION_INDEX`` from the pod's annotation (what the Job controller injects in
    the main containers; given explicitly so that ``murphy-init`` has it on every version)."""
    return {"name": INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}}


def plan_host(plan: TrainingPlan) -> int | None:
    """The 0-based host of a one-host-per-plan launch (a plan with ``current_host``), else None
    (one plan for every host)."""
    hosts = getattr(plan, "hosts", None)
    current = getattr(plan, "current_host", None)
    if not hosts or current is None or current not in hosts:
        return None
    return list(hosts).index(current)


def first_host_plan(plan: TrainingPlan) -> TrainingPlan:
    """``plan`` as algo-1's with every host named: the one plan the Job, its spec hash and its
    files are made from, whichever host's plan (or the one plan ``murphy kubernetes render``
    gets, which names no hosts) it starts from."""
    changes: dict[str, Any] = {}
    n = host_count(plan)
    hosts = tuple(host_names(n)) if n > 1 else tuple(getattr(plan, "hosts", None) or ())
    if n > 1 and tuple(getattr(plan, "hosts", None) or ()) != hosts:
        changes["hosts"] = hosts
    if hosts and getattr(plan, "current_host", None) != hosts[0]:
        changes["current_host"] = hosts[0]
    first = getattr(plan, "first_host_container", "")
    if first and first != plan.container_name:
        changes["container_name"] = first
    return dataclasses.replace(plan, **changes) if changes else plan


def pod_index(pod: Mapping[str, Any]) -> int:
    meta = pod.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(INDEX_ANNOTATION) or (meta.get("labels") or {}).get(INDEX_ANNOTATION) or "0"
    try:
        return int(raw)
    except ValueError:
        return 0
