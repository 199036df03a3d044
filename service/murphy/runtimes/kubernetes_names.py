"""Names, labels and annotations of the Kubernetes objects murphy makes for a job (pure functions).

Names are DNS-1123 labels that murphy controls: a prefix (``mt-`` training, ``mr-`` rule), a
lowercase slug of the SageMaker name cut so the whole name stays within :data:`MAX_NAME`, and
8 hex digits of a hash over what makes the job unique (installation, account, region, job
name, rule). The same job always gets the same names, so a launch is idempotent by name, and two
jobs never share one. :data:`MAX_NAME` (52) leaves room under the 63-character limit on label
values and hostnames for what Kubernetes appends (an Indexed Job's pod hostname is
``<job>-<index>``, its pods ``<job>-<index>-<5 random>``).

The SageMaker names themselves, which may be longer or use characters a name may not, travel in
annotations; labels carry only what selectors need.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from murphy.runtimes.base import Plan, RulePlan

MAX_NAME = 52
#: Kubernetes limits a label value to 63 characters.
MAX_LABEL_VALUE = 63
DOMAIN = "murphy.io"

MANAGED_BY = "app.kubernetes.io/managed-by"
COMPONENT = "app.kubernetes.io/component"
RUNTIME_ID = f"{DOMAIN}/runtime-id"
JOB_KEY = f"{DOMAIN}/job-key"
ROLE = f"{DOMAIN}/role"
RULE_KEY = f"{DOMAIN}/rule-key"
JOB = f"{DOMAIN}/training-job"
#: Annotations.
JOB_NAME = f"{DOMAIN}/training-job-name"
ACCOUNT = f"{DOMAIN}/account"
REGION = f"{DOMAIN}/region"
RULE_NAME = f"{DOMAIN}/rule-name"
CONTAINER_NAME = f"{DOMAIN}/container-name"
INSTANCE_TYPE = f"{DOMAIN}/instance-type"
SPEC_HASH = f"{DOMAIN}/spec-hash"
#: The training job's MaxRuntimeInSeconds, on the anchor (rule Jobs' deadlines derive from it).
MAX_RUNTIME = f"{DOMAIN}/max-runtime-s"
#: Written by the runtime: when murphy asked a Job to stop and why (on the Job), and, on the
#: anchor, per container (``.training`` or ``.<rule key>``), the stop and any failure murphy gave
#: up on, so that both survive the Job's deletion and a restart of murphy.
STOP_REQUESTED_AT = f"{DOMAIN}/stop-requested-at"
STOP_REASON = f"{DOMAIN}/stop-reason"
FAILURE = f"{DOMAIN}/failure"
#: On a Secret: the id (not the secret) of the S3 key murphy's gateway issued for its pods, so
#: that whoever removes the pods (a restarted murphy, the reconciler) revokes that key.
S3_ACCESS_KEY_ID = f"{DOMAIN}/s3-access-key-id"

_NOT_NAME = re.compile(r"[^a-z0-9]+")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9._-]+")


_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def is_dns1123_label(text: str) -> bool:
    return _DNS1123_LABEL.fullmatch(text) is not None


def short_hash(*parts: str) -> str:
    """8 hex digits of sha256 over ``parts`` (NUL-separated, so ``("ab", "c") != ("a", "bc")``)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8]


def slug(text: str, width: int) -> str:
    """``text`` lowercased, runs of other characters as one ``-``, at most ``width`` characters,
    never starting or ending with ``-``; ``x`` if nothing is left."""
    s = _NOT_NAME.sub("-", text.lower()).strip("-")[:width].rstrip("-")
    return s or "x"


def _name(prefix: str, text: str, digest: str, suffix: str = "") -> str:
    width = MAX_NAME - len(prefix) - len(digest) - len(suffix) - 1
    return f"{prefix}{slug(text, width)}-{digest}{suffix}"


def job_key(rid: str, plan: Plan) -> str:
    """The hash that names every object of ``plan``'s training job."""
    return short_hash(rid, plan.account, plan.region, plan.job_name)


def rule_key(rid: str, plan: RulePlan) -> str:
    return short_hash(rid, plan.account, plan.region, plan.job_name, plan.rule_name)


def training_name(rid: str, plan: Plan) -> str:
    """The training Job (and its headless Service): ``mt-<slug>-<hash>``."""
    return _name("mt-", plan.job_name, job_key(rid, plan))


def config_map_name(rid: str, plan: Plan) -> str:
    """The job's anchor ConfigMap, the owner of everything else: ``mt-<slug>-<hash>-cfg``."""
    return _name("mt-", plan.job_name, job_key(rid, plan), "-cfg")


def secret_name(rid: str, plan: Plan) -> str:
    """The S3 credentials of the training pods: ``mt-<slug>-<hash>-s3``."""
    return _name("mt-", plan.job_name, job_key(rid, plan), "-s3")


def rule_secret_name(rid: str, plan: RulePlan) -> str:
    """A rule's own S3 credentials (each rule Job has its own key): ``mr-<slug>-<hash>-s3``."""
    return _name("mr-", f"{plan.job_name}-{plan.rule_name}", rule_key(rid, plan), "-s3")


def pod_secret_name(rid: str, plan: Plan) -> str:
    """The Secret the pods of ``plan`` get their S3 credentials from."""
    return rule_secret_name(rid, plan) if isinstance(plan, RulePlan) else secret_name(rid, plan)


def rule_job_name(rid: str, plan: RulePlan) -> str:
    """One Job per rule: ``mr-<slug of job and rule>-<hash>``."""
    return _name("mr-", f"{plan.job_name}-{plan.rule_name}", rule_key(rid, plan))


def label_value(text: str) -> str:
    """``text`` as a valid label value (≤63 of ``[A-Za-z0-9._-]``, alphanumeric at both ends);
    the exact text goes in an annotation."""
    s = _NOT_LABEL.sub("-", text)[:MAX_LABEL_VALUE]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", s)


def job_selector(rid: str, plan: Plan) -> dict[str, str]:
    """Labels that select every object of one training job."""
    return {MANAGED_BY: "murphy", RUNTIME_ID: rid, JOB_KEY: job_key(rid, plan)}


def object_labels(rid: str, plan: Plan, *, role: str | None = None) -> dict[str, str]:
    """Labels of an object made for ``plan``; ``role`` overrides the plan's (``config`` for the
    anchor and the Secret, which belong to the job rather than to one container)."""
    role = role or plan.role
    out = {
        **job_selector(rid, plan),
        COMPONENT: {"training": "training", "rule": "rule-evaluator"}.get(role, role),
        ROLE: role,
        JOB: label_value(plan.job_name),
    }
    if isinstance(plan, RulePlan) and role == "rule":
        out[RULE_KEY] = rule_key(rid, plan)
    return out


def object_annotations(plan: Plan, *, role: str | None = None) -> dict[str, str]:
    out = {JOB_NAME: plan.job_name, ACCOUNT: plan.account, REGION: plan.region}
    if (role or plan.role) in ("training", "rule"):
        out[CONTAINER_NAME] = plan.container_name
        out[INSTANCE_TYPE] = plan.instance_type or ""
    if isinstance(plan, RulePlan) and (role or plan.role) == "rule":
        out[RULE_NAME] = plan.rule_name
    return out


def spec_hash(obj: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the object's canonical JSON without its own spec-hash annotation and
    owner references: a
    re-launch that finds an object by name adopts it only when this matches."""
    doc = json.loads(json.dumps(obj))
    meta = doc.get("metadata", {})
    meta.get("annotations", {}).pop(SPEC_HASH, None)
    # Set by the runtime once the anchor exists (its uid), so not part of what was asked for.
    meta.pop("ownerReferences", None)
    canon = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()


def with_spec_hash(obj: dict[str, Any]) -> dict[str, Any]:
    obj.setdefault("metadata", {}).setdefault("annotations", {})[SPEC_HASH] = spec_hash(obj)
    return obj
