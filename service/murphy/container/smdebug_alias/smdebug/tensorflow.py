"""``smdebug.tensorflow``: murphy's TensorFlow hooks (``murphy.hook.tensorflow``)."""

from murphy.hook.tensorflow import *  # noqa: F403
from murphy.hook.tensorflow import __all__  # noqa: F401
