"""ARNs, derived names and ``s3://`` locations of a job, in one place."""

from __future__ import annotations

import hashlib
import re

from murphy.exceptions import ValidationException

_NON_NAME = re.compile(r"[^a-zA-Z0-9]+")


def training_job_arn(region: str, account: str, name: str) -> str:
    return f"arn:aws:sagemaker:{region}:{account}:training-job/{name}"


def processing_job_arn(region: str, account: str, name: str) -> str:
    return f"arn:aws:sagemaker:{region}:{account}:processing-job/{name}"


def name_from_training_job_arn(arn: str) -> str:
    """``arn:aws:sagemaker:r:a:training-job/NAME`` → ``NAME``; anything else is a ValidationException."""
    head, sep, name = arn.partition(":training-job/")
    if not sep or not head.startswith("arn:aws") or not name:
        raise ValidationException(f"Invalid resource ARN '{arn}': murphy tags training jobs only.")
    return name


def rule_job_name(job: str, rule: str) -> str:
    """The rule evaluation (processing) job's name: ``<job[:26]>-<rule[:26]>-<8 hex>`` as AWS's
    notebooks derive it, restricted to the job-name alphabet."""
    safe_rule = _NON_NAME.sub("-", rule).strip("-")[:26].strip("-") or "rule"
    digest = hashlib.sha256(f"{job}\0{rule}".encode()).hexdigest()[:8]
    return f"{job[:26].rstrip('-')}-{safe_rule}-{digest}"


def path_segment(name: str) -> str:
    """A rule name (any characters) as one safe ``s3://`` path segment."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "rule"
    return safe if safe == name else f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:6]}"


def s3_join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


def debug_output_uri(hook_s3_output_path: str, job: str) -> str:
    return s3_join(hook_s3_output_path, job, "debug-output")


def model_artifacts_uri(output_s3_path: str, job: str) -> str:
    return s3_join(output_s3_path, job, "output", "model.tar.gz")


def rule_output_uri(s3_output_path: str, job: str, rule: str) -> str:
    return s3_join(s3_output_path, job, "rule-output", path_segment(rule))
