"""A stand-in ``smdebug`` package for custom rules, installed only by the rule runner.

A custom rule written for SageMaker imports ``smdebug.rules.rule.Rule``, ``smdebug.trials``,
``smdebug.exceptions`` ... When the real ``smdebug`` is not installed, :func:`smdebug_shim`
puts small modules with those names into ``sys.modules`` that re-export murphy's equivalents,
and removes them again on exit. Nothing here runs at import time: importing murphy never makes
``import smdebug`` succeed.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from murphy import exceptions
from murphy.core.collection import CollectionKeys
from murphy.core.modes import ALLOWED_MODE_NAMES, ALLOWED_MODES, ModeKeys
from murphy.rules.invoker import invoke_rule
from murphy.rules.req_tensors import RequiredTensors
from murphy.rules.rule import Rule
from murphy.trial import StepState, Tensor, create_trial, no_refresh, refresh
from murphy.trial.trial import Trial


def real_smdebug_available() -> bool:
    """True if the real ``smdebug`` package can be imported (it is then used as is)."""
    if "smdebug" in sys.modules:
        return not getattr(sys.modules["smdebug"], "__murphy_shim__", False)
    try:
        return importlib.util.find_spec("smdebug") is not None
    except (ImportError, ValueError):
        return False


def _exception_names() -> dict[str, Any]:
    return {
        name: obj for name, obj in vars(exceptions).items()
        if isinstance(obj, type) and issubclass(obj, BaseException)
    }


def _module_contents() -> dict[str, dict[str, Any]]:
    """Module name → the attributes it exports."""
    return {
        "smdebug": {"modes": ModeKeys, "CollectionKeys": CollectionKeys, "__version__": "1.0.34+murphy"},
        "smdebug.rules": {"Rule": Rule, "invoke_rule": invoke_rule, "RequiredTensors": RequiredTensors},
        "smdebug.rules.rule": {"Rule": Rule},
        "smdebug.rules.rule_invoker": {"invoke_rule": invoke_rule},
        "smdebug.rules.req_tensors": {"RequiredTensors": RequiredTensors},
        "smdebug.trials": {"create_trial": create_trial, "Trial": Trial},
        "smdebug.trials.trial": {"Trial": Trial},
        "smdebug.exceptions": _exception_names(),
        "smdebug.core": {},
        "smdebug.core.modes": {
            "ModeKeys": ModeKeys, "ALLOWED_MODES": list(ALLOWED_MODES), "ALLOWED_MODE_NAMES": list(ALLOWED_MODE_NAMES),
        },
        "smdebug.core.tensor": {"StepState": StepState, "Tensor": Tensor},
        "smdebug.core.collection": {"CollectionKeys": CollectionKeys},
        "smdebug.analysis": {},
        "smdebug.analysis.utils": {"no_refresh": no_refresh, "refresh": refresh},
    }


_PACKAGES = {"smdebug", "smdebug.rules", "smdebug.trials", "smdebug.core", "smdebug.analysis"}


@contextmanager
def smdebug_shim() -> Iterator[bool]:
    """Make ``smdebug.*`` importable as murphy inside the block (yields True), unless the real
    ``smdebug`` is installed (yields False and changes nothing). On exit the shim modules, and
    any attribute links between them, are removed from ``sys.modules``."""
    if real_smdebug_available():
        yield False
        return
    installed: dict[str, types.ModuleType] = {}
    for name, attrs in _module_contents().items():
        module = types.ModuleType(name, f"murphy's stand-in for {name} (rule runner only)")
        module.__dict__.update(attrs)
        module.__murphy_shim__ = True  # type: ignore[attr-defined]
        if name in _PACKAGES:
            module.__path__ = []
        installed[name] = module
    for name, module in installed.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(installed[parent], child, module)
    previous = {name: sys.modules.get(name) for name in installed}
    sys.modules.update(installed)
    try:
        yield True
    finally:
        for name, before in previous.items():
            if before is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = before
