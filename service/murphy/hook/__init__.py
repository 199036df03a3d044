"""Tensor capture with smdebug's hook API.

``import murphy.hook`` imports no framework: the PyTorch adapter ``murphy.hook.torch`` (``Hook``,
``get_hook``) and the TensorFlow one ``murphy.hook.tensorflow`` (``SessionHook``, ``KerasHook``)
are loaded on first attribute access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from murphy.core.collection import Collection, CollectionKeys
from murphy.core.modes import ModeKeys
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig, SaveConfigMode
from murphy.hook.config import HookConfig

# smdebug spells it ``smd.modes.TRAIN``: the enum itself.
modes = ModeKeys

if TYPE_CHECKING:
    from murphy.hook import tensorflow as tensorflow
    from murphy.hook import torch as torch

__all__ = [
    "Collection",
    "CollectionKeys",
    "HookConfig",
    "ModeKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "modes",
]


def __getattr__(name: str) -> Any:
    if name in ("torch", "tensorflow"):
        return importlib.import_module(f"murphy.hook.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
