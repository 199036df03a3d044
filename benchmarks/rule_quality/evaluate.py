"""Run the built-in rules over one finished run through murphy's engine and say what fired where.

Every rule runs with AWS's default parameters except those in :data:`OVERRIDES` (none today; each
entry must say why). A rule counts on a run only when the run saved what it reads
(:func:`applicable`), so a false-alarm rate is never diluted by runs the rule cannot see.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from murphy.core.modes import ModeKeys
from murphy.rules.builtin._metric_pairs import validation_pairs
from murphy.rules.engine import evaluate_rule
from murphy.rules.registry import lookup
from murphy.trial import create_trial

RULES: tuple[str, ...] = (
    "ExplodingTensor", "VanishingGradient", "LossNotDecreasing", "Overfit", "Overtraining",
    "AllZero", "WeightUpdateRatio", "PoorWeightInitialization", "SaturatedActivation",
    "DeadRelu", "ClassImbalance", "UnchangedTensor", "TreeDepth", "FeatureImportanceOverweight", "Confusion",
)
# Parameters that differ from AWS's defaults, with the reason (printed and documented).
OVERRIDES: dict[str, tuple[dict[str, str], str]] = {}


@dataclass(frozen=True)
class Verdict:
    """One rule on one run: fired at ``step`` (global) with ``message``, or not; or n/a."""

    rule: str
    applicable: bool
    fired: bool
    step: int | None = None
    message: str = ""
    error: str | None = None


def _any(names: list[str], pattern: str) -> bool:
    rx = re.compile(pattern)
    return any(rx.match(n) for n in names)


# Rules that read every saved tensor by default. On an XGBoost run that includes the tree table
# (leaves have NaN splits, round 0's tree ids are all 0) and the validation labels (the same at
# every round), which they flag whatever the training does, so they are not judged there (AWS
# lists ExplodingTensor and the weight/activation rules for deep learning only; on XGBoost, give
# AllZero / UnchangedTensor a tensor_regex, see docs/xgboost.md).
EVERY_TENSOR_RULES = frozenset({"ExplodingTensor", "AllZero", "UnchangedTensor", "VanishingGradient",
                                "WeightUpdateRatio", "PoorWeightInitialization", "SaturatedActivation",
                                "DeadRelu"})


def is_xgboost_run(names: list[str]) -> bool:
    return _any(names, r"^(trees|feature_importance)/")


def applicable(rule: str, trial: Any) -> bool:
    """Whether ``trial`` holds the tensors ``rule`` reads with its default parameters."""
    names = list(trial.tensor_names())
    if rule in EVERY_TENSOR_RULES and is_xgboost_run(names):
        return False
    losses = list(trial.tensor_names(collection="losses")) if "losses" in trial.collections() else []
    needs = {
        "VanishingGradient": lambda: _any(names, "^gradient/"),
        "WeightUpdateRatio": lambda: _any(names, r"^(?!gradient).*weight"),
        "LossNotDecreasing": lambda: bool(losses),
        "Overtraining": lambda: bool(losses),
        "Overfit": lambda: bool(losses) and (bool(trial.steps(mode=ModeKeys.EVAL)) or bool(validation_pairs(losses))),
        "PoorWeightInitialization": lambda: _any(names, r".*relu_input|^gradient/") or bool(losses),
        "SaturatedActivation": lambda: _any(names, r".*tanh_input|.*sigmoid_input"),
        "DeadRelu": lambda: _any(names, r".*relu_output"),
        "ClassImbalance": lambda: _any(names, r".*labels"),
        "TreeDepth": lambda: _any(names, r"(^|.*/)trees/Node$"),
        "FeatureImportanceOverweight": lambda: _any(names, r".*feature_importance/weight"),
        # Judged on the XGBoost runs only: on the PyTorch runs it fires at the first evaluation of
        # every classification run (an untrained network's confusion matrix is far from diagonal,
        # which is what it reports); judging it there needs a start_step past warm-up.
        "Confusion": lambda: "labels" in names and "predictions" in names and is_xgboost_run(names),
    }
    check = needs.get(rule)
    return True if check is None else bool(check())


def evaluate_run(run_dir: str, rules: tuple[str, ...] = RULES) -> list[Verdict]:
    """Each rule of ``rules`` over the finished run at ``run_dir``, stopping at its first finding."""
    out: list[Verdict] = []
    for name in rules:
        trial = create_trial(run_dir)
        if not applicable(name, trial):
            out.append(Verdict(name, False, False))
            continue
        params = OVERRIDES.get(name, ({}, ""))[0]
        rule = lookup(name)(trial, **params)
        outcome = evaluate_rule(rule, poll_interval=0.01, idle_timeout=5.0)
        if outcome.status == "Error":
            out.append(Verdict(name, True, False, error=outcome.reason))
        else:
            fired = outcome.status == "IssuesFound"
            out.append(Verdict(name, True, fired, outcome.step, outcome.message))
    return out
