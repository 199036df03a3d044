"""The built-in rule registry and the smdebug stand-in modules for custom rules."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from murphy import exceptions
from murphy.core.modes import ModeKeys
from murphy.rules import Rule, invoke_rule, registry
from murphy.rules.shim import real_smdebug_available, smdebug_shim
from murphy.trial import StepState, create_trial, no_refresh
from murphy.trial.trial import Trial


def test_the_twenty_aws_names_and_the_xgboost_report() -> None:
    assert len(registry.BUILTIN_RULE_NAMES) == 21
    assert {"ExplodingTensor", "VanishingGradient", "StalledTrainingRule", "NLPSequenceRatio", "TreeDepth",
            "CreateXgboostReport"} <= set(
        registry.BUILTIN_RULE_NAMES
    )


def test_builtin_rules_lists_every_module_present() -> None:
    rules = registry.builtin_rules()
    for name, module in registry.BUILTIN_MODULES.items():
        present = importlib.util.find_spec(f"murphy.rules.builtin.{module}") is not None
        assert (name in rules) == present, name
    for name, cls in rules.items():
        assert issubclass(cls, Rule) and cls.__name__ == name


def test_lookup_is_case_insensitive() -> None:
    pytest.importorskip("murphy.rules.builtin.exploding_tensor")
    assert registry.lookup("explodingtensor") is registry.lookup(" ExplodingTensor ") is registry.lookup("EXPLODINGTENSOR")
    assert registry.lookup("ExplodingTensor").__name__ == "ExplodingTensor"


def test_lookup_errors() -> None:
    with pytest.raises(registry.UnknownRuleError, match=r"^unknown rule 'Nope': not a built-in rule \(built-in rules: AllZero, "):
        registry.lookup("Nope")


def test_a_module_without_the_class_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BUILTIN_MODULES, "Common", "_common")
    with pytest.raises(registry.RuleNotAvailableError, match=r"^built-in rule Common is not available: murphy.rules.builtin._common defines no Rule class Common$"):
        registry.lookup("common")


def test_shim_makes_smdebug_imports_resolve_to_murphy_only_inside() -> None:
    assert not real_smdebug_available()
    with smdebug_shim() as installed:
        assert installed
        from smdebug import modes  # type: ignore[import-not-found]
        from smdebug.analysis.utils import no_refresh as nr  # type: ignore[import-not-found]
        from smdebug.core.modes import ModeKeys as MK  # type: ignore[import-not-found]
        from smdebug.core.tensor import StepState as SS  # type: ignore[import-not-found]
        from smdebug.exceptions import TensorUnavailableForStep  # type: ignore[import-not-found]
        from smdebug.rules import Rule as R2  # type: ignore[import-not-found]
        from smdebug.rules.rule import Rule as R1  # type: ignore[import-not-found]
        from smdebug.rules.rule_invoker import invoke_rule as ir  # type: ignore[import-not-found]
        from smdebug.trials import create_trial as ct  # type: ignore[import-not-found]
        from smdebug.trials.trial import Trial as T  # type: ignore[import-not-found]

        assert SS is StepState and T is Trial
        assert R1 is R2 is Rule and ir is invoke_rule and ct is create_trial and nr is no_refresh
        assert modes is MK is ModeKeys and modes.TRAIN is ModeKeys.TRAIN
        assert TensorUnavailableForStep is exceptions.TensorUnavailableForStep
        assert not real_smdebug_available()  # the shim is not mistaken for the real package
    assert not [m for m in sys.modules if m == "smdebug" or m.startswith("smdebug.")]
    with pytest.raises(ImportError):
        __import__("smdebug.rules.rule")


def test_importing_murphy_rules_installs_nothing() -> None:
    import murphy.rules.entrypoint  # noqa: F401

    assert "smdebug" not in sys.modules
