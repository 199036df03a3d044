"""What one job's container may do in S3: its grants, and the decision for each request.

A container's grants are ``s3://`` prefixes it may read and prefixes it may write (writing
implies reading: a job reads back its own checkpoints and tensors). They are derived from the
plan the runtime launches (:func:`murphy.runtimes.grants.grants_for`) and stored on the
container's temporary access key as its action list (``s3:read:<bucket>/<prefix>``, ``s3:write:<bucket>/<prefix>``), so the
gateway finds them with the key, after a service restart too, and the key can call nothing of
murphy's API (no ``sagemaker:*`` action matches them).

:func:`decide` maps a path-style S3 request (method, path, query, the copy-source header, the
body of a multi-object delete) to the locations it touches and checks each. Pure functions.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote

# The grants live beside the plans they are derived from (the Docker runtime mounts them too).
from murphy.runtimes.grants import READ, WRITE, Grants, grants_for

__all__ = ["READ", "WRITE", "Grants", "Request", "decide", "grants_for"]

#: Bucket-level sub-resources that only say where or whether a bucket is (HeadBucket answers
#: with no query); allowed on a bucket the container has any grant in.
_BUCKET_INFO = frozenset({"location"})
#: Query keys of a listing (ListObjects v1/v2, ListObjectVersions).
_LISTING = frozenset({"list-type", "prefix", "delimiter", "max-keys", "continuation-token", "start-after",
                      "marker", "encoding-type", "fetch-owner", "versions", "key-marker", "version-id-marker"})


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
