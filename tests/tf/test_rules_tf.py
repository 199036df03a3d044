"""The built-in rules' verdicts on TF-written runs (murphy's SessionHook): each faulty run makes
exactly the rules it should fire fire, at the step it goes wrong; the healthy run fires none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from murphy.rules import evaluate_rule
from murphy.rules.builtin.all_zero import AllZero
from murphy.rules.builtin.exploding_tensor import ExplodingTensor
from murphy.rules.builtin.loss_not_decreasing import LossNotDecreasing
from murphy.rules.builtin.unchanged_tensor import UnchangedTensor
from murphy.rules.builtin.vanishing_gradient import VanishingGradient
from murphy.rules.builtin.weight_update_ratio import WeightUpdateRatio
from murphy.trial import create_trial

pytestmark = pytest.mark.tf

RULES: dict[str, Any] = {
    "ExplodingTensor": ExplodingTensor,
    "VanishingGradient": VanishingGradient,
    "LossNotDecreasing": LossNotDecreasing,
    "WeightUpdateRatio": WeightUpdateRatio,
    "AllZero": AllZero,
    "UnchangedTensor": UnchangedTensor,
}
# run -> {rule: step it fires at}; every other rule: NoIssuesFound.
EXPECTED: dict[str, dict[str, int]] = {
    "healthy": {},
    # lr 0 on one batch: the loss stops decreasing (checked every 10 steps), the weights do not
    # move (update ratio 0 from step 1), and stay unchanged over 3 steps.
    "frozen": {"LossNotDecreasing": 10, "WeightUpdateRatio": 1, "UnchangedTensor": 2},
    # inputs x 1e-9: gradients ~1e-9 from the start, so nothing learns either.
    "tiny": {"VanishingGradient": 0, "LossNotDecreasing": 11, "WeightUpdateRatio": 1, "UnchangedTensor": 2},
    # zero weights, zero inputs: everything is zero (and so vanishing and unchanged).
    "zeros": {"AllZero": 0, "VanishingGradient": 0, "WeightUpdateRatio": 1, "UnchangedTensor": 2},
    # the article's run: NaN from step 2; Adam's first two updates are 0 (its v overflows).
    "seed": {"ExplodingTensor": 2, "WeightUpdateRatio": 1},
}


@pytest.mark.parametrize("run", sorted(EXPECTED))
def test_rule_verdicts_on_tf_runs(run: str, rule_runs: Path, seed_run: tuple[Path, str]) -> None:
    path = seed_run[0] if run == "seed" else rule_runs / run
    got = {}
    for name, cls in RULES.items():
        outcome = evaluate_rule(cls(create_trial(str(path))), poll_interval=0.01)
        got[name] = outcome.step if outcome.status == "IssuesFound" else outcome.status
    want = {name: EXPECTED[run].get(name, "NoIssuesFound") for name in RULES}
    assert got == want
