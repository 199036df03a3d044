"""Ownership a Docker container needs on the host before it starts.

The images run as a non-root user; a root-run service creates the container's directories and,
with local buckets, the bucket prefixes as root. These grants let that user write where it must
and nowhere else: its own ``opt``/``run`` directories and the prefixes it writes to.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from murphy.runtimes.base import Plan, TrainingPlan


def grant_ownership(plan: Plan, cdir: Path, user: str, buckets_dir: str | os.PathLike[str] | None) -> None:
    """Give ``user`` (``uid:gid``) the container's directories and its write prefixes."""
    if os.geteuid() != 0:
        return
    uid, gid = (int(x) for x in user.split(":", 1))
    targets = [cdir / "opt", cdir / "run"] if isinstance(plan, TrainingPlan) else []
    for t in targets:
        for dirpath, dirnames, filenames in os.walk(t):
            os.chown(dirpath, uid, gid)
            for n in (*dirnames, *filenames):
                os.chown(os.path.join(dirpath, n), uid, gid, follow_symlinks=False)
    if buckets_dir:
        uris = ([plan.tensor_uri, plan.output_uri, plan.tensorboard_uri] if isinstance(plan, TrainingPlan)
                else [plan.result_uri])
        for uri in uris:
            if uri and uri.startswith("s3://"):
                _grant_prefix(Path(buckets_dir), uri, uid, gid)


def _grant_prefix(buckets_dir: Path, uri: str, uid: int, gid: int) -> None:
    # Local buckets come into being on first write (as in the process runtime), so the
    # bucket directory may be created here too.
    bucket, _, key = uri[len("s3://"):].partition("/")
    path = buckets_dir
    for part in [bucket, *(p for p in key.split("/") if p)]:
        if part in (".", ".."):
            return  # the container's store refuses such a URI with a clear error
        path = path / part
        if not path.exists():
            path.mkdir()
            os.chown(path, uid, gid)
    with contextlib.suppress(OSError):
        os.chown(path, uid, gid)
