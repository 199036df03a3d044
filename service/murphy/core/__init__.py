"""Pure-data building blocks shared by the hook, the trial and the rules: modes, save and
reduction configs, collections (and their smdebug JSON form); and :mod:`murphy.core.ports`, the
free-port helper of every layer above. Imports only the standard library."""

from __future__ import annotations

from murphy.core.collection import (
    NON_HISTOGRAM_COLLECTIONS,
    NON_REDUCTION_COLLECTIONS,
    SCALAR_COLLECTIONS,
    SM_METRIC_COLLECTIONS,
    SUMMARIES_COLLECTIONS,
    Collection,
    CollectionKeys,
    CollectionsDoc,
)
from murphy.core.modes import ALLOWED_MODE_NAMES, ALLOWED_MODES, ModeKeys
from murphy.core.reduction_config import ALLOWED_NORMS, ALLOWED_REDUCTIONS, ReductionConfig
from murphy.core.save_config import SaveConfig, SaveConfigMode

__all__ = [
    "ALLOWED_MODES",
    "ALLOWED_MODE_NAMES",
    "ALLOWED_NORMS",
    "ALLOWED_REDUCTIONS",
    "NON_HISTOGRAM_COLLECTIONS",
    "NON_REDUCTION_COLLECTIONS",
    "SCALAR_COLLECTIONS",
    "SM_METRIC_COLLECTIONS",
    "SUMMARIES_COLLECTIONS",
    "Collection",
    "CollectionKeys",
    "CollectionsDoc",
    "ModeKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
]
