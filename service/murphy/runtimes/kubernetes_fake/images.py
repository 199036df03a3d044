"""What the fake kubelet "pulls": an image reference becomes a local program (the image's
ENTRYPOINT and CMD), from a mapping the test gives and then murphy's image catalog, the same
one the process runtime uses (rule evaluators run ``python -m murphy.rules``, every other
catalog image the training toolkit, ``python -m murphy.container``, as murphy's images'
ENTRYPOINT does; the toolkit then runs script mode or the command the job's ``murphy.json``
names). ``python`` in an argv is the given interpreter, whose directory leads ``PATH``, as the
image's own Python would. An image found nowhere fails to
pull (``ErrImagePull``, then ``ImagePullBackOff``), as a missing image does on a cluster; a
malformed reference is ``InvalidImageName``.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes.catalog import ImageCatalog

_REFERENCE = re.compile(
    r"^((?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9-]+)*(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$")
#: Images with a shell and Python but no ENTRYPOINT of their own: ``(ENTRYPOINT, CMD)`` as their
#: Docker Hub originals have them (a pod's ``args`` replace CMD, its ``command`` both).
BASE_IMAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "murphy/python:*": ((), ()), "murphy/python-deps:*": ((), ()), "murphy/base:*": ((), ("/bin/bash",)),
    "python:*": ((), ("python3",)), "python": ((), ("python3",)), "busybox*": ((), ("sh",)), "debian*": ((), ("bash",)),
}
#: What a test maps an image to: its ENTRYPOINT argv, or ``{"entrypoint": [...], "cmd": [...]}``.
ImageSpec = Sequence[str] | Mapping[str, Sequence[str]]


def _spec(value: ImageSpec) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if isinstance(value, Mapping):
        unknown = set(value) - {"entrypoint", "cmd"}
        if unknown:
            raise ValueError(f"an image is {{'entrypoint': [...], 'cmd': [...]}}; unknown keys {sorted(unknown)}")
        return tuple(value.get("entrypoint") or ()), tuple(value.get("cmd") or ())
    return tuple(value), ()
_PYTHONS = ("python", "python3")


class PullError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass(frozen=True)
class Image:
    reference: str
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...] = ()
    python: str = ""


class ImageResolver:
    """``images``: fnmatch pattern → the image's ENTRYPOINT argv (empty: none) or
    ``{"entrypoint": [...], "cmd": [...]}``; first match wins,
    before murphy's catalog. ``python``: the interpreter that ``python``/``python3`` means."""

    def __init__(self, catalog: ImageCatalog | None = None, images: Mapping[str, ImageSpec] | None = None,
                 python: str = sys.executable) -> None:
        self.catalog = catalog or ImageCatalog()
        self.images = {**{k: _spec(v) for k, v in (images or {}).items()}, **BASE_IMAGES}
        self.python = python

    def resolve(self, reference: str) -> Image:
        if not _REFERENCE.match(reference):
            raise PullError("InvalidImageName", f'Failed to apply default image tag "{reference}": couldn\'t parse '
                            f'image name "{reference}": invalid reference format')
        for pattern, (entrypoint, cmd) in self.images.items():
            if fnmatch.fnmatchcase(reference, pattern):
                return Image(reference, entrypoint, cmd)
        try:
            entry = self.catalog.resolve(reference)
        except RuntimeBackendError:
            raise PullError("ErrImagePull", f'failed to pull and unpack image "{reference}": failed to resolve '
                            f'reference "{reference}": {reference}: not found') from None
        if entry.kind == "rule-evaluator":
            return Image(reference, ("python", "-m", "murphy.rules"))
        # murphy's training images all have the toolkit as ENTRYPOINT; it runs script mode or the
        # catalog's command from the job's murphy.json.
        return Image(reference, ("python", "-m", "murphy.container"), python=entry.python)

    def argv(self, image: Image, command: Sequence[str] | None, args: Sequence[str] | None) -> list[str]:
        """Kubernetes' rule: ``command`` replaces ENTRYPOINT (and drops CMD), ``args`` replaces CMD."""
        if command:
            argv = [*command, *(args or [])]
        else:
            argv = [*image.entrypoint, *(args if args is not None else image.cmd)]
        if argv and argv[0] in _PYTHONS:
            argv[0] = image.python or self.python
        return argv
