"""A local object gets the file mode open() would give it (not mkstemp's 0600): a training
container, running as another uid, reads the bucket directory it is given (e.g. a script-mode
``sourcedir.tar.gz`` the embedded service uploaded)."""

from __future__ import annotations

import itertools
import os
import shutil
import stat
from pathlib import Path

import pytest

from murphy.storage import local
from murphy.storage.local import LocalObjectStore


def test_objects_are_created_with_the_umask_mode(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    store.put("job/source/sourcedir.tar.gz", b"x")
    mask = os.umask(0o022)
    os.umask(mask)
    mode = stat.S_IMODE((tmp_path / "job" / "source" / "sourcedir.tar.gz").stat().st_mode)
    assert mode == 0o666 & ~mask


def test_a_put_after_its_directory_was_removed_recreates_it(tmp_path: Path) -> None:
    # The store remembers the directories it made; one removed behind its back is made again.
    store = LocalObjectStore(str(tmp_path / "root"))
    store.put("index/000000000/a.json", b"1")
    shutil.rmtree(tmp_path / "root")
    store.put("index/000000000/b.json", b"2")
    assert store.get("index/000000000/b.json") == b"2"
    assert list(store.list("index/")) == ["index/000000000/b.json"]


def test_a_temp_name_already_taken_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another writer (same pid in another container) or a crashed run holds the first name.
    monkeypatch.setattr(local, "_tmp_counter", itertools.count())
    (tmp_path / "k").mkdir()
    taken = tmp_path / "k" / f"x.{os.getpid()}-0.tmp"
    taken.write_bytes(b"someone else's")
    store = LocalObjectStore(str(tmp_path))
    store.put("k/x", b"mine")
    assert (tmp_path / "k" / "x").read_bytes() == b"mine"
    assert taken.read_bytes() == b"someone else's"
    assert list(store.list("k/")) == ["k/x"]
