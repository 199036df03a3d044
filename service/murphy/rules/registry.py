"""Name → class lookup of the built-in rules (SageMaker's names, matched case-insensitively).

Each rule lives in its own module, ``murphy.rules.builtin.<snake_name>``, imported only when
asked for, so a rule container loads just the rule it runs.
"""

from __future__ import annotations

import importlib

from murphy.rules.params import RuleParameterError
from murphy.rules.rule import Rule

# AWS's rule names (smdebug-format.md §h) → module names under murphy.rules.builtin.
BUILTIN_MODULES: dict[str, str] = {
    "ExplodingTensor": "exploding_tensor",
    "VanishingGradient": "vanishing_gradient",
    "LossNotDecreasing": "loss_not_decreasing",
    "Overfit": "overfit",
    "Overtraining": "overtraining",
    "AllZero": "all_zero",
    "WeightUpdateRatio": "weight_update_ratio",
    "PoorWeightInitialization": "poor_weight_initialization",
    "SaturatedActivation": "saturated_activation",
    "DeadRelu": "dead_relu",
    "ClassImbalance": "class_imbalance",
    "TensorVariance": "tensor_variance",
    "UnchangedTensor": "unchanged_tensor",
    "CheckInputImages": "check_input_images",
    "SimilarAcrossRuns": "similar_across_runs",
    "StalledTrainingRule": "stalled_training_rule",
    "NLPSequenceRatio": "nlp_sequence_ratio",
    "Confusion": "confusion",
    "FeatureImportanceOverweight": "feature_importance_overweight",
    "TreeDepth": "tree_depth",
    "CreateXgboostReport": "create_xgboost_report",
}
BUILTIN_RULE_NAMES: tuple[str, ...] = tuple(BUILTIN_MODULES)

_PACKAGE = "murphy.rules.builtin"


class UnknownRuleError(RuleParameterError):
    """``rule_to_invoke`` names no built-in rule."""


class RuleNotAvailableError(RuleParameterError):
    """A built-in rule's module is missing from this installation."""


def canonical_name(name: str) -> str | None:
    """The AWS spelling of a built-in rule name given in any case, or None."""
    wanted = name.strip().lower()
    for known in BUILTIN_MODULES:
        if known.lower() == wanted:
            return known
    return None


def _load(name: str) -> type[Rule]:
    module_name = f"{_PACKAGE}.{BUILTIN_MODULES[name]}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name:  # the rule module exists but one of its imports is missing
            raise
        raise RuleNotAvailableError(
            f"built-in rule {name} is not available: module {module_name} is missing"
        ) from None
    cls = getattr(module, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Rule)):
        raise RuleNotAvailableError(
            f"built-in rule {name} is not available: {module_name} defines no Rule class {name}"
        )
    return cls


def lookup(name: str) -> type[Rule]:
    """The class of built-in rule ``name`` (any case: ``explodingtensor`` works).

    Raises :class:`UnknownRuleError` for a name that is not a built-in rule and
    :class:`RuleNotAvailableError` when its module is missing.
    """
    known = canonical_name(name)
    if known is None:
        raise UnknownRuleError(
            f"unknown rule {name!r}: not a built-in rule (built-in rules: {', '.join(sorted(BUILTIN_MODULES))}); "
            "a custom rule needs source_s3_uri"
        )
    return _load(known)


def builtin_rules() -> dict[str, type[Rule]]:
    """Every built-in rule available in this installation, by AWS name (missing modules are left
    out; use :func:`lookup` to get the error that says which)."""
    rules: dict[str, type[Rule]] = {}
    for name in BUILTIN_MODULES:
        try:
            rules[name] = _load(name)
        except RuleNotAvailableError:
            continue
    return rules
