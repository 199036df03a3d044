"""Local directory store: atomic puts by write-to-temp + rename, like smdebug's ``TSAccessFile``."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

from murphy.exceptions import ObjectNotFound, StorageError
from murphy.storage.base import ObjectStore, join_key

_TMP_SUFFIX = ".tmp"


_TEMP_SEQUENCE = itertools.count()
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _create_temp(path: str) -> tuple[int, str]:
    """Create ``<path>.<pid>-<n>.tmp`` exclusively; returns (fd, temp path).

    The temp file sits in the target directory so the rename never crosses filesystems; its
    name ends in .tmp, which list() hides, as smdebug's readers expect. Mode 0o666 less the
    umask (what open() gives), not mkstemp's 0600: a training container of another uid reads
    the bucket it is given. O_EXCL makes a name another process holds (same pid in another
    container, a crashed run's leftover) move on to the next number.
    """
    pid = os.getpid()
    while True:
        tmp = f"{path}.{pid}-{next(_TEMP_SEQUENCE)}{_TMP_SUFFIX}"
        try:
            return os.open(tmp, _TEMP_FLAGS, 0o666), tmp
        except FileExistsError:
            continue


def _make_dir(path: str) -> None:
    # One mkdir for the usual case (a new step's directory under an existing one).
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(path, exist_ok=True)


class LocalObjectStore:
    """An :class:`ObjectStore` over a directory. Keys map to relative paths."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root).absolute()
        self._root_str = str(self._root)
        # Directories known to exist: a hook saving a step puts two small files, and a mkdir
        # per put (an exception when it exists) cost as much as the write itself.
        self._dirs: set[str] = set()

    @property
    def root(self) -> Path:
        return self._root

    @property
    def uri(self) -> str:
        return self._root.as_uri()

    def _path(self, key: str) -> Path:
        return Path(self._file(key))

    def _file(self, key: str) -> str:
        key = key.strip("/")
        if not key or ".." in key.split("/"):
            raise StorageError(f"invalid key: {key!r}")
        return f"{self._root_str}/{key}"

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
        path = self._file(key)
        parent = path.rpartition("/")[0]
        try:
            if parent not in self._dirs:
                _make_dir(parent)
                self._dirs.add(parent)
            try:
                fd, tmp = _create_temp(path)
            except FileNotFoundError:
                # The directory went away since it was made (a test or user removed the tree).
                _make_dir(parent)
                fd, tmp = _create_temp(path)
            try:
                try:
                    with memoryview(data) as view:
                        written = 0
                        while written < len(view):
                            written += os.write(fd, view[written:])
                finally:
                    os.close(fd)
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
