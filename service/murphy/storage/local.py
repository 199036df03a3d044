"""Local directory store: atomic puts by write-to-temp + rename, like smdebug's ``TSAccessFile``."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from murphy.exceptions import ObjectNotFound, StorageError
from murphy.storage.base import ObjectStore, join_key

_TMP_SUFFIX = ".tmp"


_UMASK: list[int] = []


def _umask() -> int:
    """The process umask, read once (reading it means setting it)."""
    if not _UMASK:
        mask = os.umask(0o022)
        os.umask(mask)
        _UMASK.append(mask)
    return _UMASK[0]


class LocalObjectStore:
    """An :class:`ObjectStore` over a directory. Keys map to relative paths."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root).absolute()

    @property
    def root(self) -> Path:
        return self._root

    @property
    def uri(self) -> str:
        return self._root.as_uri()

    def _path(self, key: str) -> Path:
        key = key.strip("/")
        if not key or ".." in key.split("/"):
            raise StorageError(f"invalid key: {key!r}")
        return self._root / key

    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                if start:
                    f.seek(start)
                return f.read() if length is None else f.read(length)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFound(key) from None
        except OSError as e:
            raise StorageError(f"cannot read {key}: {e}") from e

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # The temp file sits in the target directory so the rename never crosses filesystems;
            # its name ends in .tmp, which list() hides, as smdebug's readers expect.
            fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=_TMP_SUFFIX, dir=path.parent)
            try:
                # mkstemp makes the file 0600; an object gets the mode open() would give it, so
                # a training container (another uid) can read the bucket it is given.
                os.fchmod(fd, 0o666 & ~_umask())
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as e:
            raise StorageError(f"cannot write {key}: {e}") from e

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[str]:
        # Walk only the directory the prefix names, then filter: the tensor layout puts the
        # interesting prefixes ("index/", "collections/000000000/") on directory boundaries.
        dir_part, _, _ = prefix.rpartition("/")
        top = self._root / dir_part if dir_part else self._root
        if not top.is_dir():
            return iter(())
        keys: list[str] = []
        for dirpath, dirnames, filenames in os.walk(top):
            rel_dir = os.path.relpath(dirpath, self._root).replace(os.sep, "/")
            rel_dir = "" if rel_dir == "." else rel_dir
            # Prune directories that cannot hold keys past start_after or under the prefix.
            kept = []
            for d in dirnames:
                k = join_key(rel_dir, d) + "/"
                if not (k.startswith(prefix) or prefix.startswith(k)):
                    continue
                if start_after is not None and k < start_after and not start_after.startswith(k):
                    continue
                kept.append(d)
            dirnames[:] = kept
            for name in filenames:
                if name.endswith(_TMP_SUFFIX):
                    continue
                key = join_key(rel_dir, name)
                if key.startswith(prefix) and (start_after is None or key > start_after):
                    keys.append(key)
        keys.sort()
        return iter(keys)

    def exists(self, key: str) -> bool:
        try:
            return self._path(key).is_file()
        except StorageError:
            return False

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StorageError(f"cannot delete {key}: {e}") from e

    def child(self, prefix: str) -> ObjectStore:
        return LocalObjectStore(self._root / prefix.strip("/"))
