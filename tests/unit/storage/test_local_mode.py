"""A local object gets the file mode open() would give it (not mkstemp's 0600): a training
container, running as another uid, reads the bucket directory it is given (e.g. a script-mode
``sourcedir.tar.gz`` the embedded service uploaded)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from murphy.storage.local import LocalObjectStore


def test_objects_are_created_with_the_umask_mode(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    store.put("job/source/sourcedir.tar.gz", b"x")
    mask = os.umask(0o022)
    os.umask(mask)
    mode = stat.S_IMODE((tmp_path / "job" / "source" / "sourcedir.tar.gz").stat().st_mode)
    assert mode == 0o666 & ~mask
