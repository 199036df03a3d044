"""Pieces of the XGBoost hook that need no xgboost: the inline writer, the snapshot backend and
the JSON config's default save interval."""

from __future__ import annotations

import dataclasses
from typing import Any

from murphy.core.save_config import SaveConfig
from murphy.hook.backend import NumpyBackend
from murphy.hook.config import HookConfig
from murphy.hook.writer import BackgroundWriter, _Flush
from murphy.hook.xgboost_names import DEFAULT_SAVE_INTERVAL


class InlineWriter(BackgroundWriter):
    """The background writer's work, done at once on the calling thread (same order, same guard).

    A boosting round saves a few small tensors; handing them to a thread costs more (waking it,
    then GIL hand-offs while xgboost runs) than writing two local files in the callback, which is
    what smdebug does too.
    """

    def _put(self, item: object, force: bool = False) -> None:
        if self._closed and not force:
            return
        if isinstance(item, _Flush):
            item.done.set()
        elif not self._guard.disabled:
            self._handle(item)

    def close(self, timeout: float | None = None) -> None:
        self._closed = True
        if self.tensorboard is not None:
            self.tensorboard.close()


class XGBoostBackend(NumpyBackend):
    """numpy snapshots, with a Python float (what ``evals_log`` holds) kept as it is.

    A float is immutable, so it is its own snapshot; the writer encodes it as the float64 array
    of shape [1] that smdebug's ``make_numpy_array`` makes of it (``murphy.tensorio.events``),
    without building that array on the training thread.
    """

    def snapshot(self, value: Any) -> Any:
        return value if type(value) is float else super().snapshot(value)

    def shape(self, value: Any) -> tuple[int, ...]:
        return (1,) if type(value) is float else super().shape(value)


def xgboost_save_config(cfg: HookConfig) -> SaveConfig:
    """The hook's save config, with XGBoost's default interval (10) where none was given."""
    if cfg.save_config is None:
        return SaveConfig(save_interval=DEFAULT_SAVE_INTERVAL)
    if any(k.rpartition(".")[2] == "save_interval" for k in cfg.hook_parameters):
        return cfg.save_config
    modes = {
        mode: dataclasses.replace(c, save_interval=DEFAULT_SAVE_INTERVAL)
        for mode, c in cfg.save_config.mode_save_configs.items()
        if c is not None
    }
    return SaveConfig(mode_save_configs=modes)
