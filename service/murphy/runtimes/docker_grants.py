"""What a Docker container may touch on the host before it starts: its bucket mounts and the
ownership of what it writes.

With local buckets a container sees only its grants (:func:`murphy.runtimes.grants.grants_for`,
the same ones murphy's S3 gateway enforces on S3): each granted prefix's directory bind-mounted at
its path under ``/murphy/buckets``, read-only where it may read, read-write where it may write, and
nothing of other jobs. The images run as a non-root user; a root-run service creates the
container's directories and the bucket prefixes as root, so these grants also let that user write
where it must and nowhere else: its own ``opt``/``run`` directories and its write prefixes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from murphy.container import manifest
from murphy.exceptions import RuntimeBackendError
from murphy.runtimes.base import Plan, TrainingPlan
from murphy.runtimes.docker_spec import BUCKETS
from murphy.runtimes.grants import Grants, grants_for

log = logging.getLogger(__name__)


def local_grants(plan: Plan, buckets_dir: str | os.PathLike[str]) -> Grants:
    """``plan``'s grants, a ``ManifestFile`` channel's manifest read from the local buckets."""
    return grants_for(plan, lambda uri: _manifest_prefixes(Path(buckets_dir), uri))


def bucket_mounts(plan: Plan, buckets_dir: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """The bind mounts of ``plan``'s granted prefixes (``{host path: {"bind", "mode"}}``). Its write
    prefixes and the folders it reads (a rule's ``debug-output/``, which its training container may
    not have made yet) are created first; another read prefix (a channel, a file) that does not
    exist is not mounted (the container's download then says there is nothing there, as on S3)."""
    root = os.path.realpath(buckets_dir)
    grants = local_grants(plan, root)
    out: dict[str, dict[str, str]] = {}
    for loc in grants.write:
        host = _host_path(root, loc, create=True)
        if host is not None:
            out[host] = {"bind": _bind(root, host), "mode": "rw"}
    for loc in grants.read:
        bucket, _, key = loc.partition("/")
        if grants.may_write(bucket, key.rstrip("/") + "/"):  # inside a write prefix: mounted read-write
            continue
        host = _host_path(root, loc, create=loc.endswith("/"))
        if host is not None:
            out.setdefault(host, {"bind": _bind(root, host), "mode": "ro"})
    return out


def _bind(root: str, host: str) -> str:
    return BUCKETS + host[len(root):]


def _host_path(root: str, loc: str, *, create: bool) -> str | None:
    """``root/<loc>``, made when ``create``; None where it does not exist. A symbolic link on the
    way (a job may have made one in a prefix it writes) is refused: Docker would follow it out of
    the buckets directory."""
    parts = [p for p in loc.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        return None  # the container's own store refuses such a URI with a clear error
    path = root
    for part in parts:
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if not create:
                return None
            os.mkdir(path)
            continue
        if stat.S_ISLNK(st.st_mode):
            raise RuntimeBackendError(f"local bucket path {path} is a symbolic link: murphy mounts only real "
                                      f"directories and files of the buckets directory (s3://{loc})")
        if create and not stat.S_ISDIR(st.st_mode):
            raise RuntimeBackendError(f"local bucket path {path} is a file, not a prefix a job can write (s3://{loc})")
    return path


def _manifest_prefixes(root: Path, uri: str) -> list[str]:
    key = uri[len("s3://"):]
    if any(p in (".", "..") for p in key.split("/")):
        return []
    try:
        return [manifest.parse((root / key).read_bytes(), uri).prefix]
    except Exception as e:  # unreadable, or not a manifest: the job's own download then fails with the reason
        log.warning("cannot read the manifest %s for the job's mounts: %s", uri, e)
        return []


def grant_ownership(plan: Plan, cdir: Path, user: str, mounts: Mapping[str, Mapping[str, str]] | None) -> None:
    """Give ``user`` (``uid:gid``) the container's directories and the bucket prefixes it writes:
    the read-write ones of ``mounts`` (:func:`bucket_mounts`, which made them)."""
    if os.geteuid() != 0:
        return
    uid, gid = (int(x) for x in user.split(":", 1))
    targets = [cdir / "opt", cdir / "run"] if isinstance(plan, TrainingPlan) else []
    for t in targets:
        for dirpath, dirnames, filenames in os.walk(t):
            os.chown(dirpath, uid, gid)
            for n in (*dirnames, *filenames):
                os.chown(os.path.join(dirpath, n), uid, gid, follow_symlinks=False)
    for host, m in (mounts or {}).items():
        if m["mode"] == "rw":
            with contextlib.suppress(OSError):
                os.chown(host, uid, gid, follow_symlinks=False)
