"""The root of murphy's error tree, in a module of its own so that :mod:`murphy.exceptions` and
:mod:`murphy.smdebug_exceptions` both derive from it without importing each other."""

from __future__ import annotations


class MurphyError(Exception):
    """Root of every murphy error."""
