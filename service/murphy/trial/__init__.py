"""Reading tensors: smdebug's ``create_trial`` / ``Trial`` / ``Tensor`` API on murphy's stores.

A notebook written for ``smdebug.trials`` runs with the import changed to ``murphy.trial``.
See ``docs/trial.md`` for the differences (faster polling, bounded waits, caching).
"""

from __future__ import annotations

from murphy.core.modes import ModeKeys
from murphy.trial.create import create_trial, no_refresh, refresh
from murphy.trial.state import StepState
from murphy.trial.tensor import Tensor, numpy_reduction
from murphy.trial.trial import NoMoreDataTimeout, Trial

modes = ModeKeys

__all__ = [
    "ModeKeys",
    "NoMoreDataTimeout",
    "StepState",
    "Tensor",
    "Trial",
    "create_trial",
    "modes",
    "no_refresh",
    "numpy_reduction",
    "refresh",
]
