"""smdebug's ``smdebug.tensorflow`` API for TensorFlow 2.21: ``import murphy.hook.tensorflow as smd``.

* :class:`SessionHook` (alias ``EstimatorHook``): TF1 graphs through ``tf.compat.v1`` and a
  ``MonitoredSession`` (``murphy.hook.tensorflow_session``);
* :class:`KerasHook`: a Keras 3 callback for ``model.fit`` (``murphy.hook.tensorflow_keras``);
* ``KerasHook.wrap_tape(tape)``: custom ``tf.GradientTape`` loops (``murphy.hook.tensorflow_tape``).

This module and those it names are the only murphy modules that import TensorFlow. What each
hook captures, and under which names, is in ``docs/tensorflow.md``.
"""

from __future__ import annotations

import os
from typing import Any

from murphy.core.collection import Collection, CollectionKeys
from murphy.core.modes import ModeKeys
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig, SaveConfigMode
from murphy.hook.base import BaseHook
from murphy.hook.config import HookConfig
from murphy.hook.tensorflow_keras import KerasHook
from murphy.hook.tensorflow_session import EstimatorHook, SessionHook

# smdebug spells it ``smd.modes.TRAIN``.
modes = ModeKeys

__all__ = [
    "Collection",
    "CollectionKeys",
    "EstimatorHook",
    "KerasHook",
    "ModeKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "SessionHook",
    "get_hook",
    "modes",
    "set_hook",
]

_HOOKS: dict[str, Any] = {"session": SessionHook, "estimator": SessionHook, "keras": KerasHook}
_HOOK: BaseHook | None = None


def get_hook(
    hook_type: str | None = None,
    json_config_path: str | os.PathLike[str] | None = None,
    create_if_not_exists: bool = False,
) -> Any:
    """The process-wide hook; with ``create_if_not_exists`` a ``hook_type`` hook ("session",
    "estimator" or "keras") is built from the JSON config when that file exists (None otherwise,
    like smdebug outside SageMaker)."""
    global _HOOK
    if _HOOK is None and create_if_not_exists:
        cls = _HOOKS.get(hook_type or "keras")
        if cls is None:
            raise ValueError(f"hook_type must be one of {sorted(_HOOKS)}, got {hook_type!r}")
        path = json_config_path if json_config_path is not None else HookConfig.default_path()
        if os.path.exists(path):
            _HOOK = cls.create_from_json_file(path)
    return _HOOK


def set_hook(hook: BaseHook | None) -> None:
    """Replace the process-wide hook."""
    global _HOOK
    _HOOK = hook
