"""murphy's stand-in for ``smdebug`` in training scripts (see ``murphy.container.smdebug_alias``).

If the real smdebug is installed anywhere else on ``sys.path``, this module loads it in its own
place (``import smdebug`` then *is* the real package, and so are all its submodules); otherwise
it is the alias: ``smdebug.pytorch``, ``smdebug.tensorflow``... are murphy's hooks.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_ALIAS_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _real_spec() -> importlib.machinery.ModuleSpec | None:
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _ALIAS_ROOT]
    return importlib.machinery.PathFinder.find_spec("smdebug", rest)


_spec = _real_spec()
if _spec is not None and _spec.loader is not None:
    # The real smdebug: the import system returns whatever sys.modules holds once this ends.
    _real = importlib.util.module_from_spec(_spec)
    sys.modules["smdebug"] = _real
    _spec.loader.exec_module(_real)
else:
    from murphy.core.collection import CollectionKeys
    from murphy.core.modes import ModeKeys
    from murphy.core.reduction_config import ReductionConfig
    from murphy.core.save_config import SaveConfig

    __murphy_alias__ = True
    __version__ = "1.0.34+murphy"
    modes = ModeKeys
    __all__ = ["CollectionKeys", "ModeKeys", "ReductionConfig", "SaveConfig", "modes"]
