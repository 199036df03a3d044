"""The error guard: the hook must never break the training it watches.

Every callback a framework calls (forward hooks, gradient hooks, ``save_scalar``...) runs through
:meth:`ErrorGuard.run`. The first exception is logged once, with its traceback, on the
``murphy.hook`` logger, and the guard trips: the hook stops saving for the rest of the process
and training carries on. The background writer trips the same guard when a write fails.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

LOGGER_NAME = "murphy.hook"

_P = ParamSpec("_P")
_R = TypeVar("_R")


class ErrorGuard:
    """A one-way switch: healthy until the first error, then disabled for good."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or logging.getLogger(LOGGER_NAME)
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self.disabled = False

    @property
    def error(self) -> BaseException | None:
        """The exception that disabled the hook, if any."""
        return self._error

    def trip(self, exc: BaseException, where: str) -> None:
        """Disable the hook because of ``exc``; only the first error is logged."""
        with self._lock:
            first = self._error is None
            if first:
                self._error = exc
            self.disabled = True
        if first:
            self._logger.error(
                "murphy hook failed in %s; tensor saving is disabled for the rest of this "
                "process, training continues",
                where,
                exc_info=(type(exc), exc, exc.__traceback__),
            )

    def run(self, where: str, fn: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        """Call ``fn`` unless disabled; on any exception trip and return None."""
        if self.disabled:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            self.trip(exc, where)
            return None


class _Guarded(Protocol):
    @property
    def guard(self) -> ErrorGuard: ...


_S = TypeVar("_S", bound=_Guarded)


def guarded(fn: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R | None]:
    """Decorate a hook method so it runs through the instance's ``guard``."""

    def wrapper(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        guard = self.guard
        if guard.disabled:
            return None
        try:
            return fn(self, *args, **kwargs)
        except Exception as exc:
            guard.trip(exc, fn.__qualname__)
            return None

    functools.update_wrapper(wrapper, fn)
    return wrapper
