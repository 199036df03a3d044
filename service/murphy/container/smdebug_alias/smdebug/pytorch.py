"""``smdebug.pytorch``: murphy's PyTorch hook (``murphy.hook.torch``) and smdebug's config names."""

from murphy.core.collection import CollectionKeys
from murphy.core.modes import ModeKeys
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig, SaveConfigMode
from murphy.hook.torch import Hook, get_hook, set_hook

modes = ModeKeys
__all__ = [
    "CollectionKeys", "Hook", "ModeKeys", "ReductionConfig", "SaveConfig", "SaveConfigMode",
    "get_hook", "modes", "set_hook",
]
