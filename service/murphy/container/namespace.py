"""``python -m murphy.container.namespace HOST_OPT_ML -- argv...``: run ``argv`` where ``/opt/ml``
is ``HOST_OPT_ML``: how the process runtime's toolkit starts every program (script mode, a
``command`` image, a container entrypoint).

Programs written for SageMaker name ``/opt/ml``: a container entrypoint (the SageMaker SDK 3.x's
``ModelTrainer`` sends ``/bin/bash -c "... /opt/ml/input/data/sm_drivers/sm_train.sh"``, and that
script and its drivers name ``/opt/ml/...`` in a dozen places, inside files too), and a script
whose hook hard-codes an ``/opt/ml/...`` ``out_dir`` (the article's does). Rewriting arguments
would miss the paths inside files, so the program gets a private mount namespace in which the
job's directory is bind-mounted at ``/opt/ml``: every path resolves exactly as in a container,
and nothing changes on the host or for other jobs. The program then sees ``MURPHY_OPT_ML=/opt/ml``.

Unprivileged users get the namespace through a user namespace that maps only their own uid and
gid (so files stay theirs and the program gains no privilege outside it); root needs no user
namespace. Where the host has no ``/opt/ml`` to mount over, a tmpfs goes over ``/opt`` with each
original entry bind-mounted back, then ``/opt/ml`` is created on it.

The fallback, where no namespace can be made (``kernel.unprivileged_userns_clone=0``, Ubuntu's
AppArmor restriction, a seccomp profile) or ``MURPHY_MOUNT_NAMESPACE=off`` turns it off: a program
whose arguments name ``/opt/ml`` fails with a reason saying how to fix that; any other runs as it
is with ``MURPHY_OPT_ML`` naming the job's directory, where murphy's hook maps an ``/opt/ml/...``
``out_dir`` (``murphy.hook.base``). Standard library only (``ctypes`` for ``unshare(2)`` /
``mount(2)``; the tests run this file on its own as another user), Linux only.
"""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from collections.abc import Sequence

SAGEMAKER_OPT_ML = "/opt/ml"
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 2
#: The exit code when the program cannot be given its /opt/ml (as a shell's "cannot execute").
NO_NAMESPACE_EXIT = 126
#: The job's /opt/ml as the program sees it (murphy.container.env.OPT_ML_ENV, which the hook reads).
OPT_ML_ENV = "MURPHY_OPT_ML"
#: ``off`` (or 0/false/no): never make a namespace, always take the fallback.
MOUNT_NAMESPACE_ENV = "MURPHY_MOUNT_NAMESPACE"
_OFF = frozenset({"0", "off", "false", "no"})


class NamespaceError(OSError):
    """The private ``/opt/ml`` could not be set up."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        errno = ctypes.get_errno()
        raise NamespaceError(errno, f"{what}: {os.strerror(errno)}")


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def _unshare(libc: ctypes.CDLL) -> None:
    """A new mount namespace; through a user namespace mapping only our ids unless we may mount."""
    if os.geteuid() == 0 and libc.unshare(CLONE_NEWNS) == 0:
        return
    uid, gid = os.geteuid(), os.getegid()
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER | CLONE_NEWNS)")
    _write("/proc/self/setgroups", "deny")  # required before an unprivileged gid_map
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def _mount(libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    _check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {source} on {target}")


def _make_opt_ml(libc: ctypes.CDLL) -> None:
    """Give a host without ``/opt/ml`` one: a tmpfs over ``/opt`` holding the original entries."""
    staging = tempfile.mkdtemp(prefix="murphy-opt-")
    try:
        _mount(libc, "/opt", staging, None, MS_BIND | MS_REC)
        _mount(libc, "tmpfs", "/opt", "tmpfs", 0, "mode=0755")
        for name in os.listdir(staging):
            src, dst = os.path.join(staging, name), os.path.join("/opt", name)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
                continue
            if os.path.isdir(src):
                os.mkdir(dst)
            else:
                open(dst, "wb").close()
            _mount(libc, src, dst, None, MS_BIND | MS_REC)
        os.mkdir(SAGEMAKER_OPT_ML)
        _check(libc.umount2(staging.encode(), MNT_DETACH), f"umount {staging}")
    finally:
        os.rmdir(staging)


def enter(host_opt_ml: str) -> None:
    """Move this (single-threaded) process into a mount namespace where ``/opt/ml`` is
    ``host_opt_ml``. Raises :class:`NamespaceError`."""
    if not os.path.isdir(host_opt_ml):
        raise NamespaceError(2, f"{host_opt_ml} is not a directory")
    # A path, not an fd: a bind source must be in the caller's (new) namespace. Under /opt it
    # stays valid, because every original entry of /opt is bound back.
    source = os.path.realpath(host_opt_ml)
    libc = _libc()
    _unshare(libc)
    # Nothing mounted from here on propagates back to the host.
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    if not os.path.isdir(SAGEMAKER_OPT_ML):
        if os.path.lexists(SAGEMAKER_OPT_ML) or not os.path.isdir("/opt"):
            raise NamespaceError(20, "this host has no /opt directory to hold /opt/ml")
        _make_opt_ml(libc)
    _mount(libc, source, SAGEMAKER_OPT_ML, None, MS_BIND | MS_REC)


def disabled() -> bool:
    """True when ``MURPHY_MOUNT_NAMESPACE`` turns the namespace off (the fallback is forced)."""
    return os.environ.get(MOUNT_NAMESPACE_ENV, "").strip().lower() in _OFF


def names_opt_ml(argv: Sequence[str]) -> bool:
    return any(SAGEMAKER_OPT_ML in arg for arg in argv)


def how_to_fix(error: BaseException) -> str:
    if disabled():
        return (f"murphy: cannot give this container its own {SAGEMAKER_OPT_ML} on the process runtime ({error}); "
                f"its program names {SAGEMAKER_OPT_ML}/... paths. Unset {MOUNT_NAMESPACE_ENV} (it turns the "
                "private mount namespace off), or use the Docker runtime (docs/runtimes.md).")
    return (f"murphy: cannot give this container its own {SAGEMAKER_OPT_ML} on the process runtime ({error}); "
            f"its program names {SAGEMAKER_OPT_ML}/... paths. Run murphy as root, allow unprivileged user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 23.10+ also "
            "kernel.apparmor_restrict_unprivileged_userns=0), or use the Docker runtime (docs/runtimes.md).")


def _fail(host_opt_ml: str, message: str) -> int:
    print(message, file=sys.stderr, flush=True)
    failure = os.path.join(host_opt_ml, "output", "failure")
    try:
        if not os.path.exists(failure):
            os.makedirs(os.path.dirname(failure), exist_ok=True)
            with open(failure, "w", encoding="utf-8") as f:
                f.write(message)
    except OSError:
        pass
    return NO_NAMESPACE_EXIT


def wrap(argv: Sequence[str], host_opt_ml: str, python: str) -> list[str]:
    """``argv`` as the toolkit starts it on a host where ``/opt/ml`` is not the job's."""
    return [python, "-m", "murphy.container.namespace", host_opt_ml, "--", *argv]


def write_python_shims(bin_dir: str, python: str) -> str:
    """``python``, ``python3``, ``pip`` and ``pip3`` in ``bin_dir`` running ``python`` (the
    service's interpreter, which has torch and murphy's hook): SDK 3.x's ``sm_train.sh`` takes the
    first ``python3``/``pip3`` on ``PATH``, which on a host is rarely that one. Scripts rather
    than symlinks, so a virtualenv's interpreter still finds its ``pyvenv.cfg``."""
    os.makedirs(bin_dir, exist_ok=True)
    quoted = "'" + python.replace("'", "'\\''") + "'"
    for name, extra in (("python", ""), ("python3", ""), ("pip", " -m pip"), ("pip3", " -m pip")):
        path = os.path.join(bin_dir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(f'#!/bin/sh\nexec {quoted}{extra} "$@"\n')
        os.chmod(path, 0o755)
    return bin_dir


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m murphy.container.namespace HOST_OPT_ML -- argv...", file=sys.stderr)
        return 2
    host_opt_ml, command = args[0], args[2:]
    try:
        if disabled():
            raise NamespaceError(0, f"turned off by {MOUNT_NAMESPACE_ENV}={os.environ[MOUNT_NAMESPACE_ENV]}")
        enter(host_opt_ml)
        os.environ[OPT_ML_ENV] = SAGEMAKER_OPT_ML
    except OSError as e:
        if names_opt_ml(command):
            return _fail(host_opt_ml, how_to_fix(e))
        # The fallback: the hook maps an /opt/ml/... out_dir into the job's directory.
        os.environ[OPT_ML_ENV] = host_opt_ml
        print(f"murphy: no private {SAGEMAKER_OPT_ML} ({e}); running the program without it "
              f"({OPT_ML_ENV}={host_opt_ml})", flush=True)
    try:
        os.execvp(command[0], command)
    except OSError as e:
        return _fail(host_opt_ml, f"murphy: cannot start {command[0]!r}: {e}")


if __name__ == "__main__":
    sys.exit(main())
