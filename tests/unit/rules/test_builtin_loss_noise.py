"""Loss rules on per-minibatch losses saved every step: quiet while the loss falls through its
noise, firing when it stops falling or rises (benchmarks/rule_quality's noisy healthy runs)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from murphy.rules.builtin.loss_not_decreasing import LossNotDecreasing

from .trialkit import run_rule, write_trial

LOSS = "CrossEntropyLoss_output_0"


def noisy_falling(n: int = 40, seed: int = 4) -> list[float]:
    """A loss falling 3 % per step (26 % per 10 steps) with +-25 % uniform batch scatter."""
    u = np.random.default_rng(seed).uniform(-1, 1, n)
    return [2.0 * 0.97**t * (1 + 0.25 * u[t]) for t in range(n)]


def losses_trial(losses: list[float]) -> Any:
    return write_trial({t: {LOSS: v} for t, v in enumerate(losses)})


def test_loss_not_decreasing_quiet_on_noisy_falling_loss() -> None:
    losses = noisy_falling()
    # What made the single-save increase cap fire: after the check at 10 passes, a save more
    # than 5 % above the save 10 steps back, a lucky batch followed by an unlucky one.
    assert losses[10] < losses[0] * 0.999
    assert any(losses[s] > losses[s - 10] * 1.05 for s in range(11, 20))
    # The level keeps falling: the mean of every 10 steps is below the 10 before.
    means = [float(np.mean(losses[i:i + 10])) for i in range(0, 40, 10)]
    assert all(b < a for a, b in itertools.pairwise(means))
    assert run_rule(LossNotDecreasing(losses_trial(losses))) is None


def test_loss_not_decreasing_fires_on_a_jump_beyond_the_noise() -> None:
    losses = noisy_falling()
    jumped = losses[:25] + [3 * v for v in losses[25:]]  # the loss triples at step 25
    rule = LossNotDecreasing(losses_trial(jumped))
    assert run_rule(rule) == 25
    assert rule.finding is not None and "rose more than 5 %" in rule.finding.message
    assert "beyond batch noise" not in rule.finding.message  # one save sufficed


def test_loss_not_decreasing_confirms_a_rise_within_the_noise_on_window_means() -> None:
    losses = noisy_falling()
    # From step 11 the loss grows 8 % per step: each save alone is within the batch scatter
    # until the level (mean of the last 10 saves) is 5 % above the 10 before it, at step 19,
    # before the check at 20.
    rising = losses[:11] + [losses[t] * 1.08 ** (t - 10) for t in range(11, 40)]
    rule = LossNotDecreasing(losses_trial(rising))
    assert run_rule(rule) == 19
    assert rule.finding is not None and "beyond batch noise" in rule.finding.message


def test_loss_not_decreasing_still_fires_on_a_flat_noisy_loss() -> None:
    u = np.random.default_rng(1).uniform(-1, 1, 60)
    flat = [1.0 + 0.25 * x for x in u]
    fired = run_rule(LossNotDecreasing(losses_trial(flat)))
    assert fired is not None and fired % 10 == 0  # at a check (single saves, as documented)
