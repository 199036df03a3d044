"""The tensor mirror: what is uploaded, in which order, and what never is."""

from __future__ import annotations

import os
from pathlib import Path

from murphy.container.mirror import TensorMirror, is_temporary, order, scan
from murphy.storage import LocalObjectStore

EVENT = "events/000000000000/000000000000_worker_0.tfevents"
EVENT1 = "events/000000000001/000000000001_worker_0.tfevents"
INDEX = "index/000000000/000000000000_worker_0.json"
INDEX1 = "index/000000000/000000000001_worker_0.json"
COLLS = "collections/000000000/worker_0_collections.json"


def put(root: Path, key: str, data: bytes = b"x") -> Path:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def mirror(tmp_path: Path) -> tuple[Path, Path, TensorMirror]:
    local, remote = tmp_path / "local", tmp_path / "remote"
    local.mkdir()
    return local, remote, TensorMirror(str(local), LocalObjectStore(remote))


def test_order_is_collections_then_events_then_index() -> None:
    keys = [INDEX1, EVENT1, "framework/x.json", COLLS, INDEX, EVENT]
    assert order(keys) == [COLLS, EVENT, EVENT1, "framework/x.json", INDEX, INDEX1]


def test_nothing_but_collections_goes_up_before_a_collections_file(tmp_path: Path) -> None:
    local, remote, m = mirror(tmp_path)
    put(local, EVENT)
    put(local, INDEX)
    assert m.run_pass() == 0
    assert not remote.exists()
    put(local, COLLS)
    assert m.run_pass() == 3
    assert m.history == [COLLS, EVENT, INDEX]
    assert (remote / INDEX).read_bytes() == b"x"


def test_final_pass_uploads_without_collections(tmp_path: Path) -> None:
    local, remote, m = mirror(tmp_path)
    put(local, INDEX)
    put(local, EVENT)
    assert m.pending() == []
    assert m.run_pass(final=True) == 2
    assert m.history == [EVENT, INDEX]
    assert (remote / EVENT).exists()


def test_end_marker_and_temporary_files_are_never_mirrored(tmp_path: Path) -> None:
    local, remote, m = mirror(tmp_path)
    put(local, COLLS)
    put(local, "training_job_end.ts", b"")
    put(local, EVENT + ".tmp")
    put(local, "index/000000000/000000000000_worker_0.json.ab12cd.tmp")
    put(local, "events/.hidden")
    assert m.run_pass() == 1
    assert m.run_pass(final=True) == 0
    assert m.history == [COLLS]
    assert not (remote / "training_job_end.ts").exists()
    assert is_temporary("a.tmp") and is_temporary(".x") and not is_temporary("a.tmpl")


def test_changed_files_go_up_again_unchanged_ones_do_not(tmp_path: Path) -> None:
    local, remote, m = mirror(tmp_path)
    put(local, COLLS, b"v1")
    put(local, EVENT)
    assert m.run_pass() == 2
    assert m.run_pass() == 0
    path = put(local, COLLS, b"version 2")
    os.utime(path, ns=(1, 1))  # a different mtime even on coarse clocks
    put(local, EVENT1)
    put(local, INDEX1)
    assert m.run_pass() == 3
    assert m.history[2:] == [COLLS, EVENT1, INDEX1]
    assert (remote / COLLS).read_bytes() == b"version 2"


def test_the_index_directory_is_listed_before_the_events(tmp_path: Path) -> None:
    # An index file seen in a listing must have its event file seen in the same listing: the
    # writer creates the event file first, so the index directory is listed first.
    local, _, _ = mirror(tmp_path)
    put(local, EVENT)
    put(local, COLLS)
    put(local, INDEX)
    keys = list(scan(str(local)))
    assert keys[0] == INDEX and set(keys) == {INDEX, EVENT, COLLS}


def test_missing_local_dir_is_an_empty_pass(tmp_path: Path) -> None:
    m = TensorMirror(str(tmp_path / "nope"), LocalObjectStore(tmp_path / "remote"))
    assert m.run_pass() == 0 and m.run_pass(final=True) == 0
