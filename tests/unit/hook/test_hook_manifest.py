"""The hook writes the step manifest beside smdebug's files (murphy.tensorio.manifest)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from murphy.hook import ModeKeys, SaveConfig
from murphy.hook.base import BaseHook
from murphy.storage import open_store
from murphy.tensorio.manifest import MANIFEST_ENV, MANIFEST_PREFIX, decode_segment, segment_key


def _train(out: Path, steps: int) -> None:
    # max_block_ms=None: a tight loop outruns any writer; this test counts every step's file.
    hook = BaseHook(out, save_config=SaveConfig(save_interval=1), include_collections=["weights"], max_block_ms=None)
    hook.set_mode(ModeKeys.TRAIN)
    for s in range(steps):
        hook._begin_step()
        hook._save("fc.weight", np.full((2, 2), float(s), dtype=np.float32))
    hook.close()


def test_segments_hold_exactly_the_index_files_the_hook_wrote(tmp_path: Path) -> None:
    _train(tmp_path, 230)
    store = open_store(str(tmp_path))
    segs = list(store.list(MANIFEST_PREFIX))
    assert segs == [segment_key("worker_0", a, b) for a, b in ((0, 99), (100, 199), (200, 229))]
    held: dict[str, bytes] = {}
    for key in segs:
        held.update(decode_segment(store.get(key)))
    index = {k: store.get(k) for k in store.list("index/")}
    assert held == index and len(index) == 230


def test_the_manifest_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MANIFEST_ENV, "0")
    _train(tmp_path, 120)
    store = open_store(str(tmp_path))
    assert list(store.list(MANIFEST_PREFIX)) == [] and len(list(store.list("index/"))) == 120
