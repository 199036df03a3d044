"""What one job's container may touch in S3: its grants, derived from the plan it runs.

A container's grants are ``s3://`` prefixes it may read and prefixes it may write (writing
implies reading: a job reads back its own checkpoints and tensors). murphy's S3 gateway
(:mod:`murphy.auth.s3policy`) enforces them per request; the Docker runtime with local buckets
bind-mounts exactly them (:mod:`murphy.runtimes.docker_grants`). Pure functions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from murphy.runtimes.base import Plan, RulePlan, TrainingPlan

READ, WRITE = "s3:read:", "s3:write:"


@dataclass(frozen=True)
class Grants:
    """``bucket/prefix`` strings (no scheme) a container may read and write."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()

    def actions(self) -> tuple[str, ...]:
        return tuple(READ + p for p in self.read) + tuple(WRITE + p for p in self.write)

    @classmethod
    def from_actions(cls, actions: Iterable[str] | None) -> Grants:
        acts = tuple(actions or ())
        return cls(tuple(a[len(READ):] for a in acts if a.startswith(READ)),
                   tuple(a[len(WRITE):] for a in acts if a.startswith(WRITE)))

    def may_read(self, bucket: str, key: str) -> bool:
        return _under(f"{bucket}/{key}", self.read + self.write)

    def may_write(self, bucket: str, key: str) -> bool:
        return _under(f"{bucket}/{key}", self.write)

    def may_list(self, bucket: str, prefix: str) -> bool:
        # A listing shows keys under ``prefix``: all of them must be readable, so the prefix must
        # lie inside a grant (or be a grant's folder without its trailing slash).
        want = f"{bucket}/{prefix}"
        return not _dotted(want) and any(want.startswith(g) or g == want + "/" for g in self.read + self.write)

    def buckets(self) -> set[str]:
        return {g.split("/", 1)[0] for g in self.read + self.write}


def _under(location: str, grants: tuple[str, ...]) -> bool:
    return not _dotted(location) and any(location.startswith(g) for g in grants)


def _dotted(location: str) -> bool:
    """A ``.`` or ``..`` segment: a literal key on AWS, but a filer-backed server (SeaweedFS) or
    a proxy in front of one may resolve it out of the granted prefix, so none passes."""
    return any(seg in (".", "..") for seg in location.split("/"))


def _location(uri: str | None, *, folder: bool) -> str | None:
    """``s3://b/p`` → ``b/p`` (``b/p/`` for a folder murphy names, so ``job-1`` never matches
    ``job-10``); None for anything that is not an ``s3://`` URI."""
    if not uri or not uri.startswith("s3://"):
        return None
    loc = uri[len("s3://"):]
    if "/" not in loc:
        loc += "/"
    if folder and not loc.endswith("/"):
        loc += "/"
    return loc


def grants_for(plan: Plan, manifest_prefixes: Callable[[str], list[str]] | None = None) -> Grants:
    """A container's grants. Training: reads its input channels (a ``ManifestFile`` channel: the
    manifest and the prefix it names, via ``manifest_prefixes``) and its source tarball
    (``sagemaker_submit_directory``), writes its output, checkpoint,
    tensor and TensorBoard prefixes. A rule: reads its job's tensors (and a custom rule its
    ``source_s3_uri``), writes its own results."""
    if isinstance(plan, RulePlan):
        read = [_location(plan.base_trial_uri, folder=True),
                _location(plan.rule_parameters.get("source_s3_uri"), folder=False)]  # a custom rule's .py
        write = [_location(plan.result_uri, folder=True)]
    else:
        assert isinstance(plan, TrainingPlan)
        read = [_location(_hyperparameter(plan.hyperparameters.get("sagemaker_submit_directory")), folder=False)]
        for ch in plan.channels:
            read.append(_location(ch.uri, folder=False))
            if ch.data_type == "ManifestFile" and manifest_prefixes is not None and ch.uri.startswith("s3://"):
                read.extend(_location(p, folder=False) for p in manifest_prefixes(ch.uri))
        write = [_location(u, folder=True) for u in
                 (plan.output_uri, plan.tensor_uri, plan.tensorboard_uri, plan.checkpoint_uri)]
    return Grants(tuple(dict.fromkeys(r for r in read if r)), tuple(dict.fromkeys(w for w in write if w)))


def _hyperparameter(value: str | None) -> str | None:
    """A SageMaker hyperparameter as the toolkit reads it (the SDK JSON-encodes strings)."""
    if value is None:
        return None
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    return decoded if isinstance(decoded, str) else value
