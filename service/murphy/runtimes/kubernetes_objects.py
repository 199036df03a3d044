"""The Kubernetes objects of one training job, as plain manifests (pure functions: no cluster,
no client). ``docs/kubernetes.md`` describes the layout; in creation order:

1. ``ConfigMap mt-<slug>-<hash>-cfg``, the anchor: the ``/opt/ml/input/config/*.json`` files, the
   same bytes the Docker runtime writes (:func:`murphy.runtimes.layout.write_training_layout`).
   Everything else gets an ownerReference to it once it exists (:func:`owned_by`), so deleting
   it (``propagationPolicy=Foreground``) removes the whole job.
2. ``Secret mt-<slug>-<hash>-s3``: the S3 credentials the training pods get (``envFrom``): a
   key murphy's S3 gateway issued for this job's training (never the service's own), valid
   only through the gateway, on the job's own locations, while it runs (docs/security.md).
3. With ``InstanceCount > 1``, a headless ``Service`` named like the training Job, so that
   hosts find each other as ``<job>-<index>.<job>``.
4. ``Job mt-<slug>-<hash>``: the training hosts, one Indexed Job (``completions`` = hosts).
5. Per rule, ``Secret mr-<slug>-<hash>-s3`` (the rule's own key: its job's tensors to read,
   its results to write) and ``Job mr-<slug>-<hash>``: a rule outlives training long enough to
   give its verdict and is never killed with it, so it is its own Job, not a container of the
   training pod.

Isolation is the Docker runtime's: a non-root user, a read-only root filesystem with writable
``/opt/ml``, ``/run/murphy`` and ``/tmp`` (emptyDirs), no privilege escalation, every
capability dropped, the runtime's default seccomp profile, no service account token and no
service links (workload pods get no API access); the namespace's NetworkPolicy
(``infra/kubernetes``) keeps them off everything but murphy's S3 gateway and DNS.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from murphy.container.env import OptMl
from murphy.exceptions import RuntimeBackendError
from murphy.runtimes import kubernetes_hosts as kh
from murphy.runtimes import kubernetes_names as kn
from murphy.runtimes.base import Plan, RulePlan, TrainingPlan, with_identity
from murphy.runtimes.catalog import CatalogEntry, ImageCatalog
from murphy.runtimes.kubernetes_resources import InstanceProfile, PodResources, pod_resources
from murphy.runtimes.layout import ContainerView, rule_env, write_training_layout

OPT_ML = "/opt/ml"
RUN_DIR = "/run/murphy"
STAGE_FILE = f"{RUN_DIR}/stage.json"
CONFIG_MOUNT = "/murphy/config"
FAILURE_FILE = f"{OPT_ML}/output/failure"
DEFAULT_NAMESPACE = "murphy-jobs"
#: The oldest Kubernetes minor murphy supports (podFailurePolicy and DisruptionTarget are GA).
MIN_KUBERNETES = "1.31"
#: The port murphy serves its S3 gateway on for pods (``infra/kubernetes``: the Service's ``s3-gateway``).
GATEWAY_PORT = 8081
#: The S3 endpoint as pods see it: murphy's S3 gateway behind its Service in ``infra/kubernetes``'s base.
DEFAULT_S3_ENDPOINT = f"http://murphy.murphy.svc.cluster.local:{GATEWAY_PORT}"
CREDENTIAL_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION")
#: What ``murphy kubernetes render`` prints in a Secret: the runtime issues the values at launch.
PLACEHOLDER = "<issued by murphy's S3 gateway at launch>"
PLACEHOLDER_CREDENTIALS = {"AWS_ACCESS_KEY_ID": PLACEHOLDER, "AWS_SECRET_ACCESS_KEY": PLACEHOLDER,
                           "AWS_SESSION_TOKEN": PLACEHOLDER}
_IN_IMAGE_PYTHON = "python"
#: The API server refuses a ConfigMap over 1 MiB (etcd's object limit); leave room for metadata.
MAX_CONFIG_BYTES = 1_000_000


@dataclass(frozen=True)
class KubernetesOptions:
    namespace: str = DEFAULT_NAMESPACE
    #: Which murphy installation made an object (a label; part of every name's hash).
    runtime_id: str = "murphy"
    s3_endpoint_url: str = DEFAULT_S3_ENDPOINT
    service_account: str = "murphy-workload"
    #: Copies the config files into ``/opt/ml`` before the training container starts (needs ``sh``).
    utility_image: str = "murphy/python:latest"
    image_pull_policy: str = "IfNotPresent"
    profiles: tuple[InstanceProfile, ...] = ()
    catalog: ImageCatalog = field(default_factory=ImageCatalog)
    #: SageMaker's stop window: SIGTERM, then SIGKILL after this many seconds.
    stop_grace_s: int = 120
    #: ``activeDeadlineSeconds`` is a backstop only (murphy enforces MaxRuntimeInSeconds from the
    #: container's start): max runtime + this, for scheduling and image pulls.
    startup_budget_s: int = 3600
    rule_grace_s: int = 60
    ttl_after_finished_s: int = 86400
    #: uid/gid of murphy's images' ``murphy`` user.
    run_as: int = 1000


def check_options(opts: KubernetesOptions) -> None:
    """Refuse options that would make every object invalid, naming the option."""
    if not kn.is_dns1123_label(opts.namespace):
        raise RuntimeBackendError(f"namespace {opts.namespace!r} is not a DNS-1123 label "
                                  "(at most 63 of a-z, 0-9 and '-', starting and ending alphanumeric)")
    if not opts.runtime_id or kn.label_value(opts.runtime_id) != opts.runtime_id:
        raise RuntimeBackendError(f"runtime id {opts.runtime_id!r} is not a label value "
                                  "(at most 63 of A-Z, a-z, 0-9, '-', '_', '.', starting and ending alphanumeric)")
    if not kn.is_dns1123_label(opts.service_account):
        raise RuntimeBackendError(f"service account {opts.service_account!r} is not a DNS-1123 label")


def image_entry(plan: Plan, catalog: ImageCatalog) -> CatalogEntry:
    """The catalog entry for ``plan``'s image; an image not in the catalog runs as it is (as on
    the Docker runtime), but a training image cannot evaluate rules nor the reverse."""
    hps = plan.hyperparameters if isinstance(plan, TrainingPlan) else None
    try:
        entry = catalog.resolve(plan.image, hps)
    except RuntimeBackendError:
        if isinstance(plan, TrainingPlan):
            return CatalogEntry(plan.image, "script-mode", (), "an image run as is")
        return CatalogEntry(plan.image, "rule-evaluator", (), "an image run as is")
    if isinstance(plan, TrainingPlan) and entry.kind == "rule-evaluator":
        raise RuntimeBackendError(f"image {plan.image!r} is a rule evaluator; it cannot run a training job")
    if isinstance(plan, RulePlan) and entry.kind != "rule-evaluator":
        raise RuntimeBackendError(f"image {plan.image!r} is a training image; it cannot evaluate rules")
    return entry


def _meta(name: str, opts: KubernetesOptions, plan: Plan, role: str | None = None) -> dict[str, Any]:
    return {"name": name, "namespace": opts.namespace, "labels": kn.object_labels(opts.runtime_id, plan, role=role),
            "annotations": kn.object_annotations(plan, role=role)}


def store_env(opts: KubernetesOptions) -> dict[str, str]:
    """Where ``s3://`` lives for the toolkit, the rule evaluator and the user's own boto3."""
    return {"MURPHY_S3_ENDPOINT_URL": opts.s3_endpoint_url, "AWS_ENDPOINT_URL_S3": opts.s3_endpoint_url}


def pod_env(env: Mapping[str, str], opts: KubernetesOptions) -> dict[str, str]:
    """``env`` without any S3 identity or endpoint (a job's ``Environment`` cannot name another
    key, profile or endpoint), the gateway's endpoint last: the Secret is the only identity."""
    return with_identity(env, store_env(opts))


def training_files(plan: TrainingPlan, opts: KubernetesOptions, res: PodResources) -> tuple[dict[str, str], dict[str, str]]:
    """``(config files by name, environment)`` of the training container: the Docker runtime's
    layout code, writing into a scratch directory that is read back and thrown away."""
    entry = image_entry(plan, opts.catalog)
    view = ContainerView(OPT_ML, STAGE_FILE, {}, res.num_cpus, res.num_gpus)
    with tempfile.TemporaryDirectory(prefix="murphy-k8s-") as tmp:
        host, env = write_training_layout(tmp, plan, entry, _IN_IMAGE_PYTHON, store_env(opts), view=view)
        files = {p.name: p.read_text(encoding="utf-8") for p in sorted(Path(host.config_dir).glob("*.json"))}
    rid = opts.runtime_id
    return kh.cluster_files(files, rid, plan), pod_env(kh.cluster_env(env, rid, plan), opts)


def config_map(plan: TrainingPlan, files: Mapping[str, str], opts: KubernetesOptions) -> dict[str, Any]:
    size = sum(len(k) + len(v.encode()) for k, v in files.items())
    if size > MAX_CONFIG_BYTES:
        raise RuntimeBackendError(f"the job's config files take {size} bytes; a ConfigMap holds at most "
                                  f"{MAX_CONFIG_BYTES} (the hyperparameters are too large for Kubernetes)")
    meta = _meta(kn.config_map_name(opts.runtime_id, plan), opts, plan, role="config")
    if plan.max_runtime_s:
        meta["annotations"][kn.MAX_RUNTIME] = str(int(plan.max_runtime_s))
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "immutable": True, "data": dict(files)}


def secret(plan: Plan, credentials: Mapping[str, str], opts: KubernetesOptions, *,
           access_key_id: str | None = None) -> dict[str, Any]:
    """The S3 credentials of ``plan``'s pods (the training hosts', or one rule's): only the
    :data:`CREDENTIAL_KEYS` of ``credentials``; ``access_key_id`` (not a secret) is annotated so
    that a restarted murphy revokes the key."""
    data = {k: credentials[k] for k in CREDENTIAL_KEYS if credentials.get(k)}
    if plan.region and "AWS_REGION" not in data:
        data["AWS_REGION"] = plan.region
    meta = _meta(kn.pod_secret_name(opts.runtime_id, plan), opts, plan, role="config")
    if access_key_id:
        meta["annotations"][kn.S3_ACCESS_KEY_ID] = access_key_id
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta, "immutable": True,
            "stringData": data}


def secret_of(job: Mapping[str, Any]) -> str | None:
    """The Secret a Job's pods get their S3 credentials from (its first container's ``envFrom``)."""
    containers = ((job.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or [{}]
    for ref in containers[0].get("envFrom") or []:
        name = (ref.get("secretRef") or {}).get("name")
        if name:
            return str(name)
    return None


def headless_service(plan: TrainingPlan, opts: KubernetesOptions) -> dict[str, Any]:
    rid = opts.runtime_id
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _meta(kn.training_name(rid, plan), opts, plan),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {**kn.job_selector(rid, plan), kn.ROLE: "training"}}}


def _security() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "privileged": False, "readOnlyRootFilesystem": True,
            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}


def _pod_spec(opts: KubernetesOptions, res: PodResources, containers: list[dict[str, Any]],
              volumes: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": opts.service_account,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": opts.stop_grace_s,
        "securityContext": {"runAsNonRoot": True, "runAsUser": opts.run_as, "runAsGroup": opts.run_as,
                            "fsGroup": opts.run_as, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": containers,
        "volumes": volumes,
    }
    if init:
        spec["initContainers"] = init
    if res.node_selector:
        spec["nodeSelector"] = dict(res.node_selector)
    if res.tolerations:
        spec["tolerations"] = [dict(t) for t in res.tolerations]
    return spec


def _env(env: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": env[k]} for k in sorted(env)]


def _failure_policy(container: str) -> dict[str, Any]:
    """Drain and preemption are the platform's failures (retried, counting nothing); any other
    non-zero exit is final (an algorithm error or a rule's error is never retried)."""
    return {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": container, "operator": "NotIn", "values": [0]}},
    ]}


def _init_script(plan: TrainingPlan) -> str:
    opt_ml = OptMl(OPT_ML)
    dirs = list(opt_ml.layout())
    local = (plan.debug_hook_config or {}).get("LocalPath")
    if isinstance(local, str) and local.startswith(OPT_ML + "/"):
        dirs.append(local)
    script = (f"set -eu; mkdir -p {' '.join(shlex.quote(d) for d in dirs)}; "
              f"cp {CONFIG_MOUNT}/*.json {shlex.quote(opt_ml.config_dir)}/")
    if kh.host_count(plan) > 1:  # this pod's host, from its completion index
        script += f"; python3 -c {shlex.quote(kh.PATCH_SCRIPT)} {shlex.quote(opt_ml.config_dir)}"
    return script


def training_job(plan: TrainingPlan, env: Mapping[str, str], opts: KubernetesOptions, res: PodResources) -> dict[str, Any]:
    rid = opts.runtime_id
    name = kn.training_name(rid, plan)
    entry = image_entry(plan, opts.catalog)
    hosts = kh.host_count(plan)
    shm = f"{max(64, res.memory_bytes // 4 >> 20)}Mi"  # DataLoader workers share tensors through /dev/shm
    algo = {
        "name": "algo", "image": entry.docker_image or plan.image, "imagePullPolicy": opts.image_pull_policy,
        "env": _env(env), "envFrom": [{"secretRef": {"name": kn.secret_name(rid, plan)}}],
        "resources": res.resources,
        "volumeMounts": [{"name": "opt-ml", "mountPath": OPT_ML}, {"name": "run", "mountPath": RUN_DIR},
                         {"name": "tmp", "mountPath": "/tmp"}, {"name": "dshm", "mountPath": "/dev/shm"}],
        # The script's failure file is the pod's termination message: FailureReason without
        # reading the container's filesystem.
        "terminationMessagePath": FAILURE_FILE, "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": _security(),
    }
    init = {
        "name": "murphy-init", "image": opts.utility_image, "imagePullPolicy": opts.image_pull_policy,
        "command": ["sh", "-c", _init_script(plan)],
        **({"env": [kh.index_env()]} if hosts > 1 else {}),
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
        "volumeMounts": [{"name": "opt-ml", "mountPath": OPT_ML}, {"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True}],
        "securityContext": _security(),
    }
    volumes = [{"name": "opt-ml", "emptyDir": {}}, {"name": "run", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}},
               {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}},
               {"name": "config", "configMap": {"name": kn.config_map_name(rid, plan)}}]
    pod = _pod_spec(opts, res, [algo], volumes, [init])
    if hosts > 1:
        pod["subdomain"] = name  # <job>-<index>.<job> resolves through the headless Service
    spec: dict[str, Any] = {
        "completions": hosts, "parallelism": hosts, "completionMode": "Indexed",
        "backoffLimit": 0, "podReplacementPolicy": "Failed", "podFailurePolicy": _failure_policy("algo"),
        "ttlSecondsAfterFinished": opts.ttl_after_finished_s,
        "template": {"metadata": {"labels": kn.object_labels(rid, plan), "annotations": kn.object_annotations(plan)}, "spec": pod},
    }
    if plan.max_runtime_s:
        spec["activeDeadlineSeconds"] = int(plan.max_runtime_s) + opts.startup_budget_s
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(name, opts, plan), "spec": spec}


def rule_job(plan: RulePlan, opts: KubernetesOptions, *, max_runtime_s: int | None = None) -> dict[str, Any]:
    rid = opts.runtime_id
    entry = image_entry(plan, opts.catalog)
    res = pod_resources(plan.instance_type, opts.profiles)
    env = pod_env(rule_env(plan, store_env(opts), {}), opts)
    rule = {
        "name": "rule", "image": entry.docker_image or plan.image, "imagePullPolicy": opts.image_pull_policy,
        "env": _env(env), "envFrom": [{"secretRef": {"name": kn.rule_secret_name(rid, plan)}}],
        "resources": res.resources, "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        "terminationMessagePolicy": "FallbackToLogsOnError", "securityContext": _security(),
    }
    spec: dict[str, Any] = {
        "completions": 1, "parallelism": 1, "backoffLimit": 1, "podReplacementPolicy": "Failed",
        "podFailurePolicy": _failure_policy("rule"), "ttlSecondsAfterFinished": opts.ttl_after_finished_s,
        "template": {"metadata": {"labels": kn.object_labels(rid, plan), "annotations": kn.object_annotations(plan)},
                     "spec": _pod_spec(opts, res, [rule], [{"name": "tmp", "emptyDir": {}}])},
    }
    if max_runtime_s:
        spec["activeDeadlineSeconds"] = int(max_runtime_s) + opts.startup_budget_s + opts.rule_grace_s
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(kn.rule_job_name(rid, plan), opts, plan),
            "spec": spec}


def job_objects(training: TrainingPlan, rules: Sequence[RulePlan], opts: KubernetesOptions,
                credentials: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every object of one training job, in creation order (anchor first), each with its
    spec-hash annotation and without ownerReferences (the anchor's uid exists once it is created).
    Each Secret holds ``credentials``, by default :data:`PLACEHOLDER_CREDENTIALS` (the runtime
    issues a key per Secret at launch)."""
    check_options(opts)
    training = kh.first_host_plan(training)  # what the runtime's launch makes the Job from
    creds = PLACEHOLDER_CREDENTIALS if credentials is None else credentials
    res = pod_resources(training.instance_type, opts.profiles)
    files, env = training_files(training, opts, res)
    objs = [config_map(training, files, opts), secret(training, creds, opts)]
    if kh.host_count(training) > 1:
        objs.append(headless_service(training, opts))
    objs.append(training_job(training, env, opts, res))
    for r in rules:
        objs.extend([secret(r, creds, opts), rule_job(r, opts, max_runtime_s=training.max_runtime_s)])
    return [kn.with_spec_hash(o) for o in objs]


def owned_by(obj: dict[str, Any], anchor: Mapping[str, Any], uid: str) -> dict[str, Any]:
    """``obj`` owned by the created anchor ``anchor`` (uid from the API server): a Foreground
    delete of the anchor waits for, and removes, ``obj``."""
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": anchor["metadata"]["name"], "uid": uid,
           "blockOwnerDeletion": True, "controller": False}
    obj.setdefault("metadata", {})["ownerReferences"] = [ref]
    return obj
