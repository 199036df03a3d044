"""A one-file ``sourcedir.tar.gz`` for black-box tests, packed as the SDK packs a user's source."""

from __future__ import annotations

import tempfile
from pathlib import Path

from murphy.sdk.estimator import source_tarball


def train_py_tarball(script: str, name: str = "train.py") -> bytes:
    """``sourcedir.tar.gz`` holding ``script`` as ``name``."""
    with tempfile.TemporaryDirectory() as src:
        path = Path(src) / name
        path.write_text(script)
        return source_tarball(str(path), src)
