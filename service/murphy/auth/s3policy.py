"""What one job's container may do in S3: its grants, and the decision for each request.

A container's grants are ``s3://`` prefixes it may read and prefixes it may write (writing
implies reading: a job reads back its own checkpoints and tensors). They are derived from the
plan the runtime launches (:func:`grants_for`) and stored on the container's temporary access key
as its action list (``s3:read:<bucket>/<prefix>``, ``s3:write:<bucket>/<prefix>``), so the
gateway finds them with the key, after a service restart too, and the key can call nothing of
murphy's API (no ``sagemaker:*`` action matches them).

:func:`decide` maps a path-style S3 request (method, path, query, the copy-source header, the
body of a multi-object delete) to the locations it touches and checks each. Pure functions.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote

from murphy.runtimes.base import Plan, RulePlan, TrainingPlan

READ, WRITE = "s3:read:", "s3:write:"
#: Bucket-level sub-resources that only say where or whether a bucket is (HeadBucket answers
#: with no query); allowed on a bucket the container has any grant in.
_BUCKET_INFO = frozenset({"location"})
#: Query keys of a listing (ListObjects v1/v2, ListObjectVersions).
_LISTING = frozenset({"list-type", "prefix", "delimiter", "max-keys", "continuation-token", "start-after",
                      "marker", "encoding-type", "fetch-owner", "versions", "key-marker", "version-id-marker"})


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


@dataclass(frozen=True)
class Request:
    """The parts of a path-style S3 request that decide what it touches."""

    method: str
    raw_path: str
    raw_query: str
    copy_source: str | None = None
    #: The body of ``POST ?delete`` (DeleteObjects), whose keys are each checked.
    body: bytes = b""


def _split(raw_path: str) -> tuple[str, str]:
    path = raw_path.lstrip("/")
    bucket, _, key = path.partition("/")
    return unquote(bucket), unquote(key)


def _delete_keys(body: bytes) -> list[str] | None:
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return None
    return [el.text or "" for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "Key"]


def decide(req: Request, grants: Grants) -> str | None:
    """None when ``grants`` allow ``req``; else why not (for the log: the client sees only
    S3's ``AccessDenied``)."""
    bucket, key = _split(req.raw_path)
    query: Mapping[str, str] = dict(parse_qsl(req.raw_query, keep_blank_values=True))
    method = req.method.upper()
    if not bucket:
        return "ListBuckets"
    if key:
        if method in ("GET", "HEAD"):
            ok = grants.may_write(bucket, key) if "uploadId" in query else grants.may_read(bucket, key)
        elif method in ("PUT", "DELETE") or (method == "POST" and ("uploads" in query or "uploadId" in query)):
            ok = grants.may_write(bucket, key)
            if ok and method == "PUT" and req.copy_source:
                src_bucket, src_key = _split(unquote(req.copy_source).split("?", 1)[0])
                if not grants.may_read(src_bucket, src_key):
                    return f"copy from s3://{src_bucket}/{src_key}"
        else:
            ok = False
        return None if ok else f"{method} s3://{bucket}/{key}"
    # bucket-level
    if (method == "HEAD" and not query) or (method == "GET" and query and set(query) <= _BUCKET_INFO):
        return None if bucket in grants.buckets() else f"{method} bucket {bucket}"
    if method == "GET" and set(query) <= _LISTING:
        prefix = query.get("prefix", "")
        return None if grants.may_list(bucket, prefix) else f"list s3://{bucket}/{prefix}"
    if method == "POST" and set(query) == {"delete"}:
        keys = _delete_keys(req.body)
        if keys is None:
            return "a malformed DeleteObjects body"
        denied = [k for k in keys if not grants.may_write(bucket, k)]
        return f"delete s3://{bucket}/{denied[0]}" if denied else None
    return f"{method} bucket {bucket}?{req.raw_query}"
