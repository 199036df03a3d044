"""A ``ManifestFile`` channel's manifest, SageMaker's format: a JSON list whose first element is
``{"prefix": "s3://bucket/prefix/"}`` and whose other elements are keys relative to that prefix.

The one parser of it: the container downloads (and streams) the entries
(:mod:`murphy.container.inputs`), and the service grants a job read access to the prefix
(its S3 gateway's grants, and the Docker runtime's bucket mounts), so all of them agree on what
a manifest is. Pure: the caller reads the bytes from wherever the manifest lives.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass


class ManifestError(ValueError):
    """Not a manifest (the message names it and says why)."""


@dataclass(frozen=True)
class Manifest:
    prefix: str
    #: The keys under ``prefix``, in the manifest's order (each a relative path with no ``.``,
    #: ``..`` or empty segment, so none leaves the channel's directory).
    entries: tuple[str, ...]


def parse(data: bytes | str, uri: str) -> Manifest:
    """The manifest ``data`` (read from ``uri``, which error messages name); every entry is
    checked, whichever host of a sharded channel downloads it."""
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise ManifestError(f"manifest {uri} is not valid JSON: {e}") from None
    if not (isinstance(doc, list) and doc and isinstance(doc[0], Mapping) and isinstance(doc[0].get("prefix"), str)):
        raise ManifestError(f'manifest {uri} must be a JSON list starting with {{"prefix": "s3://..."}}')
    entries = doc[1:]
    for rel in entries:
        if not isinstance(rel, str) or any(p in ("", ".", "..") for p in rel.split("/")):
            raise ManifestError(f"manifest {uri}: bad entry {rel!r}")
    return Manifest(str(doc[0]["prefix"]), tuple(entries))
