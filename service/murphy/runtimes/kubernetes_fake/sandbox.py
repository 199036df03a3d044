"""``python -m murphy.runtimes.kubernetes_fake.sandbox SPEC.json``: exec a pod's container with
its volumes mounted where the pod spec says, as a container runtime would.

The fake kubelet runs containers as local processes, but their paths are the container's
(``/opt/ml/...``, ``/murphy/config``, the termination message file): like
:mod:`murphy.container.namespace` (which does this for ``/opt/ml`` alone), the program gets a
private mount namespace, here with a new root: a tmpfs holding bind mounts of the host's
top-level directories (read-only with ``readOnlyRootFilesystem``), a private ``/dev`` and
``/tmp``, every ``volumeMount`` bound at its ``mountPath`` (a host directory that lacks the
mount point is shadowed by a tmpfs with its entries bound back, so nothing is created on the
host), the pod's ``/etc/hosts`` and hostname (a UTS namespace), then ``chroot``, the
container's uid/gid, and ``exec``. Root needs nothing else; other users get a user namespace
mapping their own ids. Linux only; standard library only.

SPEC: ``{"root", "argv", "env", "workdir", "hostname", "hosts", "uid", "gid", "groups",
"read_only_root", "mounts": [{"source", "target", "read_only"}]}``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from murphy.container.namespace import (
    MNT_DETACH,
    MS_BIND,
    MS_PRIVATE,
    MS_REC,
    _check,
    _libc,
    _mount,
    _unshare,
)

CLONE_NEWUTS = 0x04000000
MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_NOSUID = 0x2
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
#: The exit code when the container cannot be set up (a runtime's "cannot execute").
SETUP_FAILED = 128


class Root:
    def __init__(self, root: str) -> None:
        self.libc = _libc()
        self.root = root
        self.ours = {root}  # directories on our own tmpfs (or in a volume): safe to create in
        self._n = 0

    def path(self, target: str) -> str:
        return os.path.join(self.root, target.lstrip("/"))

    def bind(self, source: str, target: str, read_only: bool = False) -> None:
        _mount(self.libc, source, target, None, MS_BIND | MS_REC)
        if read_only:
            _mount(self.libc, None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)

    def _shadow(self, d: str) -> None:
        """Put a tmpfs over host directory ``d`` with its entries bound back, so that mount
        points can be created in it without touching the host."""
        self._n += 1
        staging = os.path.join(self.root, f".shadow-{self._n}")
        os.mkdir(staging)
        self.bind(d, staging)
        _mount(self.libc, "tmpfs", d, "tmpfs", 0, "mode=0755")
        for name in os.listdir(staging):
            self._copy_entry(os.path.join(staging, name), os.path.join(d, name))
        _check(self.libc.umount2(staging.encode(), MNT_DETACH), f"umount {staging}")
        os.rmdir(staging)
        self.ours.add(d)

    def _copy_entry(self, src: str, dst: str) -> None:
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        elif os.path.isdir(src):
            os.mkdir(dst)
            self.bind(src, dst)
        elif os.path.exists(src):
            open(dst, "wb").close()
            self.bind(src, dst)

    def ensure(self, path: str, is_dir: bool) -> None:
        if os.path.lexists(path):
            return
        parent = os.path.dirname(path)
        self.ensure(parent, True)
        if parent not in self.ours:
            self._shadow(parent)
        if is_dir:
            os.mkdir(path)
            self.ours.add(path)
        else:
            open(path, "wb").close()

    def build(self, read_only: bool, private_tmp: str) -> None:
        _mount(self.libc, "tmpfs", self.root, "tmpfs", 0, "mode=0755")
        for name in sorted(os.listdir("/")):
            src, dst = "/" + name, self.path(name)
            if name in ("dev", "tmp", "proc", "sys"):
                os.mkdir(dst)
                self.ours.add(dst)
                continue
            self._copy_entry(src, dst)
            if os.path.isdir(src) and not os.path.islink(src) and read_only:
                _mount(self.libc, None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        self.bind("/proc", self.path("proc"))
        self.bind("/sys", self.path("sys"), read_only=True)
        dev = self.path("dev")
        _mount(self.libc, "tmpfs", dev, "tmpfs", MS_NOSUID, "mode=0755")
        for d in _DEVICES:
            if os.path.exists("/dev/" + d):
                open(os.path.join(dev, d), "wb").close()
                self.bind("/dev/" + d, os.path.join(dev, d))
        for name, to in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
            os.symlink(to, os.path.join(dev, name))
        os.mkdir(os.path.join(dev, "shm"))
        _mount(self.libc, "tmpfs", os.path.join(dev, "shm"), "tmpfs", MS_NOSUID, "mode=1777")
        self.bind(private_tmp, self.path("tmp"))


def setup(spec: dict[str, Any]) -> None:
    libc = _libc()
    _unshare(libc)  # a mount namespace (through a user namespace unless root)
    if spec.get("hostname"):
        _check(libc.unshare(CLONE_NEWUTS), "unshare(CLONE_NEWUTS)")
        name = spec["hostname"].encode()
        _check(libc.sethostname(name, len(name)), "sethostname")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    root = Root(spec["root"])
    os.makedirs(spec["root"], exist_ok=True)
    root.build(bool(spec.get("read_only_root")), spec["tmp"])
    for m in sorted(spec.get("mounts", []), key=lambda m: m["target"].count("/")):
        target = root.path(m["target"])
        is_dir = os.path.isdir(m["source"])
        root.ensure(target, is_dir)
        root.bind(m["source"], target, bool(m.get("read_only")))
        if is_dir:
            root.ours.add(target)  # a volume is the pod's: mount points may be made in it
    if spec.get("hosts"):
        root.bind(spec["hosts"], root.path("etc/hosts"))
    if spec.get("read_only_root"):
        _mount(libc, None, spec["root"], None, MS_REMOUNT | MS_RDONLY, None)
    os.chroot(spec["root"])
    workdir = spec.get("workdir") or "/"
    os.chdir(workdir if os.path.isdir(workdir) else "/")
    uid, gid = spec.get("uid"), spec.get("gid")
    if uid is not None and os.geteuid() == 0:
        os.setgroups([int(g) for g in spec.get("groups") or []])
        os.setgid(int(gid if gid is not None else uid))
        os.setuid(int(uid))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m murphy.runtimes.kubernetes_fake.sandbox SPEC.json", file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as f:
        spec = json.load(f)
    try:
        setup(spec)
    except OSError as e:
        print(f"fake kubelet: cannot set up the container's mounts: {e}", file=sys.stderr, flush=True)
        return SETUP_FAILED
    command, env = spec["argv"], spec["env"]
    try:
        os.execvpe(command[0], command, env)
    except OSError as e:
        print(f'exec: "{command[0]}": {e.strerror}', file=sys.stderr, flush=True)
        return SETUP_FAILED


if __name__ == "__main__":
    sys.exit(main())
