"""The hook's TensorBoard output: scalar and per-collection histogram summaries of every saved
step, one run (sub-directory) per mode, written beside the tensors by the hook's writer thread.

Enabled by ``export_tensorboard``/``tensorboard_dir`` (smdebug's hook arguments) or, in a
SageMaker-style container, by ``tensorboardoutputconfig.json`` (``TensorBoardOutputConfig``:
``LocalPath``, default ``/opt/ml/output/tensorboard``; the container uploads it to
``S3OutputPath``). A failure here is logged once and turns TensorBoard output off; it never
stops the tensors being saved, nor training.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from murphy.core.modes import ModeKeys
from murphy.hook.guard import LOGGER_NAME
from murphy.tensorio.locations import REDUCTIONS_PREFIX
from murphy.tensorio.summary import EventFileWriter, step_summaries

_log = logging.getLogger(LOGGER_NAME)

CONFIG_FILE_PATH_ENV = "TENSORBOARD_CONFIG_FILE_PATH"
DEFAULT_CONFIG_FILE_PATH = "/opt/ml/input/config/tensorboardoutputconfig.json"
DEFAULT_LOCAL_PATH = "/opt/ml/output/tensorboard"


def configured_dir() -> str | None:
    """``LocalPath`` of the container's ``tensorboardoutputconfig.json``, if there is one."""
    path = os.environ.get(CONFIG_FILE_PATH_ENV) or DEFAULT_CONFIG_FILE_PATH
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        _log.warning("murphy hook: ignoring unreadable %s: %s", path, e)
        return None
    local = doc.get("LocalPath") if isinstance(doc, dict) else None
    return str(local) if local else DEFAULT_LOCAL_PATH


def resolve_dir(out_dir: object, export_tensorboard: bool, tensorboard_dir: str | None) -> str | None:
    """Where a hook's TensorBoard files go, from smdebug's hook arguments (every framework's).

    ``tensorboard_dir`` wins; then, in a container, ``TensorBoardOutputConfig``
    (``tensorboardoutputconfig.json``); then ``export_tensorboard`` alone writes under
    ``<out_dir>/tensorboard`` when ``out_dir`` is a local path (smdebug's rule). None: off.
    """
    tb_dir = tensorboard_dir or configured_dir()
    if tb_dir is None and export_tensorboard and isinstance(out_dir, str | os.PathLike) \
            and "://" not in os.fspath(out_dir):
        tb_dir = os.path.join(os.fspath(out_dir), "tensorboard")
    return tb_dir


Classifier = Callable[[str], Sequence[tuple[str, bool]]]


class TensorBoardSink:
    """Writes one step's values (called from the writer thread, after the step's files)."""

    def __init__(self, logdir: str, worker: str, classify: Classifier) -> None:
        self.logdir = logdir
        self.worker = worker
        self.classify = classify
        self.failed = False
        self._writers: dict[ModeKeys, EventFileWriter] = {}

    def write_step(self, step: int, mode: ModeKeys, items: Sequence[tuple[str, Any]]) -> None:
        if self.failed:
            return
        try:
            events = step_summaries(step, [(n, v, self.classify(n)) for n, v in items
                                           if not n.startswith(REDUCTIONS_PREFIX)])
            if not events:
                return
            writer = self._writers.get(mode)
            if writer is None:
                writer = self._writers[mode] = EventFileWriter(os.path.join(self.logdir, mode.name), self.worker)
            for ev in events:
                writer.write(ev)
            writer.flush()
        except Exception as e:
            self.failed = True
            _log.warning("murphy hook: TensorBoard output failed and is off from step %d: %s: %s",
                         step, type(e).__name__, e)

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
