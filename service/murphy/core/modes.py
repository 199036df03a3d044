"""Training modes, with smdebug's names and wire values ("1".."4" in plugin data)."""

from __future__ import annotations

from enum import Enum
from typing import Any

from murphy.exceptions import SMDebugValueError


class ModeKeys(Enum):
    """smdebug's modes. A member also equals smdebug's member of the same name and value (another
    class), so ``trial.mode(s) == smdebug.modes.TRAIN`` is True in a notebook that imports both;
    the hash is Enum's (the name), so either works as a dict key for the other."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4

    def __eq__(self, other: object) -> bool:
        if type(other) is ModeKeys:
            return self is other
        if isinstance(other, Enum) and type(other).__name__ == "ModeKeys":
            return bool(other.name == self.name and other.value == self.value)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._name_)


ALLOWED_MODES = tuple(ModeKeys)
ALLOWED_MODE_NAMES = tuple(m.name for m in ModeKeys)


def as_mode(mode: Any) -> ModeKeys:
    """``mode`` as murphy's :class:`ModeKeys`.

    A notebook may import smdebug's ``modes`` next to murphy's; smdebug's ``ModeKeys`` is a
    different class with the same names and values, so an identity test would silently answer
    ``[]``. Accepted: murphy's members; any other Enum member whose name *and* value are a
    ModeKeys member's (smdebug's ``modes.TRAIN``); smdebug's mode strings ("train", "TRAIN").
    Anything else raises :class:`SMDebugValueError` naming the allowed modes.
    """
    if type(mode) is ModeKeys:
        return mode
    if isinstance(mode, Enum):
        mine = ModeKeys.__members__.get(mode.name)
        if mine is not None and mine.value == mode.value:
            return mine
    elif isinstance(mode, str):
        mine = ModeKeys.__members__.get(mode.strip().upper())
        if mine is not None:
            return mine
    raise SMDebugValueError(f"Invalid mode {mode!r}. Valid modes are {', '.join(ALLOWED_MODE_NAMES)}.")
