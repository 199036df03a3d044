"""Mirror the hook's local tensor directory to the job's ``debug-output`` while training runs.

Readers (rule evaluators, ``create_trial``) watch the remote copy, so the order of uploads is
part of the contract:

* nothing but collections files is uploaded before a collections file has been (smdebug's
  ``create_trial`` waits for one; the trial needs it to know what a tensor is);
* within a pass, every other file goes before the index files, and the index directory is
  listed *before* the rest, so an index file is never uploaded ahead of the event file it names;
* temporary files (``*.tmp``, dot files) and ``training_job_end.ts`` are never mirrored: the
  end marker is written by the toolkit itself once the final pass is done.

A file is uploaded again when its size or mtime changed.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from murphy.storage import ObjectStore

COLLECTIONS_DIR = "collections/"
INDEX_DIR = "index/"
END_MARKER = "training_job_end.ts"


def is_temporary(name: str) -> bool:
    """Files a writer has not finished (``x.tmp``, murphy's ``x.<random>.tmp``, dot files)."""
    return name.endswith(".tmp") or name.startswith(".")


def scan(root: str) -> dict[str, tuple[int, int]]:
    """``key → (size, mtime_ns)`` of the finished files under ``root``; ``index/`` is listed
    first, the rest after (see the module docstring)."""
    found: dict[str, tuple[int, int]] = {}
    index_root = os.path.join(root, INDEX_DIR.rstrip("/"))
    _walk(root, index_root, found, skip=None)
    _walk(root, root, found, skip=index_root)
    return found


def _walk(root: str, top: str, found: dict[str, tuple[int, int]], skip: str | None) -> None:
    for dirpath, dirnames, filenames in os.walk(top):
        if skip is not None:
            dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) != skip]
        for name in filenames:
            if is_temporary(name):
                continue
            path = os.path.join(dirpath, name)
            key = os.path.relpath(path, root).replace(os.sep, "/")
            if key == END_MARKER:
                continue
            try:
                st = os.stat(path)
            except FileNotFoundError:  # renamed or removed since the listing
                continue
            found[key] = (st.st_size, st.st_mtime_ns)


def order(keys: Iterable[str]) -> list[str]:
    """Upload order within one pass: collections, then everything else, then index files."""

    def rank(key: str) -> tuple[int, str]:
        if key.startswith(COLLECTIONS_DIR):
            return (0, key)
        if key.startswith(INDEX_DIR):
            return (2, key)
        return (1, key)

    return sorted(keys, key=rank)


@dataclass
class TensorMirror:
    """Incremental copy of ``local_dir`` to ``store``; :meth:`run_pass` does one pass."""

    local_dir: str
    store: ObjectStore
    uploaded: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Keys in the order they were put (for diagnostics and tests).
    history: list[str] = field(default_factory=list)
    #: Hold everything back until a collections file is up (tensors); TensorBoard files: no gate.
    gated: bool = True

    @property
    def has_collections(self) -> bool:
        return any(k.startswith(COLLECTIONS_DIR) for k in self.uploaded)

    def pending(self, final: bool = False) -> list[str]:
        """What the next pass would upload, in order. ``final`` lifts the collections gate."""
        if not os.path.isdir(self.local_dir):
            return []
        current = scan(self.local_dir)
        changed = [k for k, sig in current.items() if self.uploaded.get(k) != sig]
        ordered = order(changed)
        if final or not self.gated or self.has_collections:
            return ordered
        return [k for k in ordered if k.startswith(COLLECTIONS_DIR)]

    def run_pass(self, final: bool = False) -> int:
        """Upload new or changed files; returns how many. Within a pass the collections gate
        opens as soon as a collections file is up."""
        count = 0
        keys = self.pending(final)
        if not final and not self.has_collections and keys:
            # Collections just became available: the rest may follow in this same pass.
            self._upload_all(keys)
            count += len(keys)
            keys = self.pending(final)
        self._upload_all(keys)
        return count + len(keys)

    def _upload_all(self, keys: list[str]) -> None:
        for key in keys:
            path = os.path.join(self.local_dir, *key.split("/"))
            try:
                st = os.stat(path)
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            self.store.put(key, data)
            self.uploaded[key] = (st.st_size, st.st_mtime_ns)
            self.history.append(key)


class MirrorThread(threading.Thread):
    """Runs :meth:`TensorMirror.run_pass` every ``interval`` seconds until :meth:`stop`."""

    def __init__(self, mirror: TensorMirror, interval: float = 0.1) -> None:
        super().__init__(name="murphy-tensor-mirror", daemon=True)
        self.mirror = mirror
        self.interval = interval
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.mirror.run_pass()
            except Exception as e:  # the next pass retries; the final pass reports for real
                print(f"murphy: tensor upload failed (will retry): {type(e).__name__}: {e}",
                      file=sys.stderr, flush=True)
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
