"""``import smdebug.xgboost as smd`` inside murphy's training images: smdebug's XGBoost API
backed by murphy's hook (``murphy.hook.xgboost``), so scripts written for SageMaker Debugger run
unchanged. The toolkit puts ``smdebug_alias/`` on the script's path; smdebug itself is never
installed or imported."""

from murphy.core.collection import CollectionKeys
from murphy.core.modes import ModeKeys
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig, SaveConfigMode
from murphy.hook.xgboost import Hook, get_hook, set_hook

modes = ModeKeys

__all__ = ["CollectionKeys", "Hook", "ReductionConfig", "SaveConfig", "SaveConfigMode", "get_hook", "modes", "set_hook"]
