"""Training modes, with smdebug's names and wire values ("1".."4" in plugin data)."""

from __future__ import annotations

from enum import Enum


class ModeKeys(Enum):
    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4


ALLOWED_MODES = tuple(ModeKeys)
ALLOWED_MODE_NAMES = tuple(m.name for m in ModeKeys)
