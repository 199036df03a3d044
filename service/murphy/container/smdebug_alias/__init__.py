"""The ``smdebug`` alias the training toolkit offers to user scripts (``import smdebug.tensorflow
as smd`` runs unchanged on murphy).

``smdebug/`` below is a tiny package whose submodules re-export murphy's hooks
(``smdebug.pytorch`` → ``murphy.hook.torch``, ``smdebug.tensorflow`` → ``murphy.hook.tensorflow``;
another framework adds a small module beside them). The toolkit appends this directory to the program's
``PYTHONPATH`` (:func:`program_env`). The alias never hides the real smdebug: its
``__init__`` looks for another ``smdebug`` on ``sys.path`` first and, when there is one, loads
that one in its place. Nothing here is imported by murphy itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ALIAS_DIR = os.path.dirname(os.path.abspath(__file__))


def program_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the alias directory *last* on ``PYTHONPATH`` (the user's entries win)."""
    out = dict(env)
    parts = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != ALIAS_DIR]
    out["PYTHONPATH"] = os.pathsep.join([*parts, ALIAS_DIR])
    return out
