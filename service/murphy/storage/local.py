"""Local directory store: atomic puts by write-to-temp + rename, like smdebug's ``TSAccessFile``."""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from murphy.exceptions import ObjectNotFound, StorageError
from murphy.storage.base import Buffer, ObjectStore, join_key

_TMP_SUFFIX = ".tmp"
# O_EXCL: a temp name is never shared; a stale one (a crashed process with the same pid) fails
# the open instead of being written through, and _create moves on to the next name.
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _iov_max() -> int:
    try:
        return max(1, min(int(os.sysconf("SC_IOV_MAX")), 1024))
    except (AttributeError, ValueError, OSError):
        return 16


_IOV_MAX = _iov_max()
_PREAD_MAX = 64 << 20
_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_tmp_counter = itertools.count()
# getpid is a system call on current glibc: read once, and again in a forked child.
_pid = os.getpid()
# A store forgets the directories it knows about past this many (one per saved step: events/<step>/).
_KNOWN_DIRS_MAX = 4096


def _reset_pid() -> None:
    global _pid
    _pid = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_pid)


def _tmp_name(directory: str, name: str) -> str:
    # Unique per process and call without the random names (and retries) of mkstemp.
    return f"{directory}/{name}.{_pid}-{next(_tmp_counter)}{_TMP_SUFFIX}"


def _make_dir(directory: str, known: set[str]) -> None:
    """Make sure ``directory`` exists with ``mkdir`` calls only (no ``stat``), remembering every
    directory made or found in ``known``.

    Its parent known (a new step's ``events/<step>/``): one ``mkdir``. Another known ancestor
    (the trial root, for ``collections/000000000/``): one ``mkdir`` per missing level, top down.
    No known ancestor (a new store's first put): ``mkdir`` upwards until one is made or found,
    then down again. A known directory deleted since: ``os.makedirs``.
    """
    if len(known) >= _KNOWN_DIRS_MAX:
        known.clear()
    missing = [directory]
    parent = directory.rpartition("/")[0]
    while parent and parent not in known:
        missing.append(parent)
        parent = parent.rpartition("/")[0]
    if not parent:
        missing = _unmade_levels(directory, known)
    try:
        for level in reversed(missing):
            # try/except, not contextlib.suppress: this runs at every saved step (events/<step>/),
            # and suppress is three Python calls around the one system call.
            try:  # noqa: SIM105
                os.mkdir(level)
            except FileExistsError:
                pass
            known.add(level)
    except FileNotFoundError:  # a known directory was deleted behind the store's back
        os.makedirs(directory, exist_ok=True)
        known.add(directory)


def _unmade_levels(directory: str, known: set[str]) -> list[str]:
    """``mkdir`` of ``directory``, then of each ancestor while the one above is missing: the
    first made or found goes into ``known``; the levels below it, bottom first, are returned."""
    levels: list[str] = []
    level = directory
    while level:
        try:
            os.mkdir(level)
        except FileNotFoundError:
            levels.append(level)
            level = level.rpartition("/")[0]
            continue
        except FileExistsError:
            pass
        known.add(level)
        break
    return levels


def _create(directory: str, name: str, known: set[str]) -> tuple[str, int]:
    """Create a new temp file beside ``directory/name``; returns ``(temp path, fd)``.

    ``known``: directories this store made or found (the open is tried at once); any other is
    made first. A known directory deleted since is made again when the open fails.
    """
    if directory not in known:
        _make_dir(directory, known)
    made_dir = False
    for _ in range(8):
        tmp = _tmp_name(directory, name)
        try:
            return tmp, os.open(tmp, _CREATE, 0o666)  # the kernel applies the umask, as open() does
        except FileNotFoundError:
            if made_dir:
                raise
            os.makedirs(directory, exist_ok=True)
            made_dir = True
        except FileExistsError:
            continue  # a stale temp file of an earlier process with this pid: the next name
    raise FileExistsError(f"no free temp name for {directory}/{name}")


def _bytes_view(buf: Buffer) -> memoryview:
    view = memoryview(buf)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def write_all(fd: int, parts: Sequence[Buffer]) -> None:
    """Write every byte of ``parts`` to ``fd``: ``writev`` in runs of at most IOV_MAX buffers,
    resuming after short writes. The GIL is released during each system call."""
    views = [p if isinstance(p, bytes) else _bytes_view(p) for p in parts]
    pending = [v for v in views if len(v)]
    i = 0
    while i < len(pending):
        batch = pending[i : i + _IOV_MAX]
        n = os.writev(fd, batch) if len(batch) > 1 else os.write(fd, batch[0])
        if n <= 0:
            raise OSError(f"write returned {n}")
        for buf in batch:
            if n >= len(buf):
                n -= len(buf)
                i += 1
                continue
            pending[i] = memoryview(buf)[n:]
            break


class LocalPartsFile:
    """One ``open`` of a temp file in the target directory (``mkdir`` only when the directory is
    missing), the writes, ``close``, one ``os.replace``. The temp name ends in .tmp, which list()
    hides, as smdebug's readers expect, and the rename never crosses filesystems."""

    def __init__(self, key: str, path: str, known_dirs: set[str] | None = None) -> None:
        self.key = key
        self._path = path
        directory, _, name = path.rpartition("/")
        try:
            self._tmp, self._fd = _create(directory, name, set() if known_dirs is None else known_dirs)
        except OSError as e:
            raise StorageError(f"cannot write {key}: {e}") from e
        self._open = True

    def write(self, parts: Sequence[Buffer]) -> None:
        """Append ``parts`` (the GIL is released during the system call)."""
        try:
            write_all(self._fd, parts)
        except OSError as e:
            raise StorageError(f"cannot write {self.key}: {e}") from e

    def commit(self) -> None:
        """Close and rename into place: readers now see the whole file."""
        try:
            self._close()
            os.replace(self._tmp, self._path)
        except OSError as e:
            self.abort()
            raise StorageError(f"cannot write {self.key}: {e}") from e

    def abort(self) -> None:
        """Close and delete the temp file (the key keeps its old object, if any)."""
        with contextlib.suppress(OSError):
            self._close()
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)

    def _close(self) -> None:
        if self._open:
            self._open = False
            os.close(self._fd)


class LocalObjectStore:
    """An :class:`ObjectStore` over a directory. Keys map to relative paths."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root).absolute()
        self._root_str = str(self._root).rstrip("/") or ""
        self._uri: str | None = None
        # Directories this store made or found: a put into one of them opens its file at once.
        self._known_dirs: set[str] = set()

    @property
    def root(self) -> Path:
        return self._root

    @property
    def uri(self) -> str:
        if self._uri is None:  # percent-encoding the path is not free: once
            self._uri = self._root.as_uri()
        return self._uri

    def _path_str(self, key: str) -> str:
        key = key.strip("/")
        if not key or ".." in key.split("/"):
            raise StorageError(f"invalid key: {key!r}")
        return f"{self._root_str}/{key}"

    def _path(self, key: str) -> Path:
        return Path(self._path_str(key))

    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        # A file descriptor and one pread, from the string path: a reader opening a long trial
        # makes 100,000s of these, and a Path object plus a file object each cost about as much
        # as the system calls themselves.
        try:
            fd = os.open(self._path_str(key), _READ)
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFound(key) from None
        except OSError as e:
            raise StorageError(f"cannot read {key}: {e}") from e
        try:
            if length is not None and length <= _PREAD_MAX:
                return os.pread(fd, length, start)
            # pread allocates what it is asked for: ask for what exists, plus one byte that
            # tells a file that grew since (then read to its end as a stream)
            rest = max(0, os.fstat(fd).st_size - start)
            if rest < _PREAD_MAX:
                data = os.pread(fd, rest + 1, start)
                if len(data) <= rest or length is not None:
                    return data if length is None else data[:length]
            with open(fd, "rb", buffering=0, closefd=False) as f:
                f.seek(start)
                return f.readall() if length is None else f.read(length) or b""
        except IsADirectoryError:
            raise ObjectNotFound(key) from None
        except OSError as e:
            raise StorageError(f"cannot read {key}: {e}") from e
        finally:
            os.close(fd)

    def put(self, key: str, data: bytes) -> None:
        if type(data) is not bytes:
            self.put_parts(key, (data,))
            return
        # put_parts' system calls (open of a temp name, write, close, rename), without its
        # file object: a saved XGBoost round makes two of these.
        path = self._path_str(key)
        directory, _, name = path.rpartition("/")
        try:
            tmp, fd = _create(directory, name, self._known_dirs)
        except OSError as e:
            raise StorageError(f"cannot write {key}: {e}") from e
        try:
            try:
                n = os.write(fd, data) if data else 0
                if n < len(data):
                    write_all(fd, (memoryview(data)[n:],))  # a short write: resume after it
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(e, OSError):
                raise StorageError(f"cannot write {key}: {e}") from e
            raise

    def put_parts(self, key: str, parts: Sequence[Buffer]) -> None:
        """:meth:`put` of the concatenation of ``parts``, written with ``writev`` (no join)."""
        f = self.open_parts(key)
        try:
            f.write(parts)
        except BaseException:
            f.abort()
            raise
        f.commit()

    def open_parts(self, key: str) -> LocalPartsFile:
        """A file for ``key`` written piece by piece, visible only at :meth:`LocalPartsFile.commit`
        (with :meth:`put`'s atomicity)."""
        return LocalPartsFile(key, self._path_str(key), self._known_dirs)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[str]:
        # Walk only the directory the prefix names, then filter: the tensor layout puts the
        # interesting prefixes ("index/", "collections/000000000/") on directory boundaries.
        dir_part, _, _ = prefix.rpartition("/")
        # String paths: a hook lists its (usually missing) manifest directory at its first save.
        root = self._root_str or "/"
        top = f"{self._root_str}/{dir_part.strip('/')}" if dir_part.strip("/") else root
        if not os.path.isdir(top):
            return iter(())
        keys: list[str] = []
        for dirpath, dirnames, filenames in os.walk(top):
            rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
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
            base = f"{rel_dir}/" if rel_dir else ""  # os.walk's names hold no "/": no join_key
            for name in filenames:
                if name.endswith(_TMP_SUFFIX):
                    continue
                key = base + name
                if key.startswith(prefix) and (start_after is None or key > start_after):
                    keys.append(key)
        keys.sort()
        return iter(keys)

    def exists(self, key: str) -> bool:
        # Path.is_file's answer from the string path (every hook asks, for the end marker).
        try:
            return stat.S_ISREG(os.stat(self._path_str(key)).st_mode)
        except (StorageError, OSError, ValueError):
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
