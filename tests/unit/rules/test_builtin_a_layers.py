"""Built-in rules, group A, that look inside layers: PoorWeightInitialization,
SaturatedActivation and DeadRelu."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.rules.builtin.dead_relu import DeadRelu
from murphy.rules.builtin.poor_weight_initialization import PoorWeightInitialization
from murphy.rules.builtin.saturated_activation import SaturatedActivation
from murphy.rules.params import RuleParameterError

from .trialkit import TrialKit, run_rule, write_trial

# ---- PoorWeightInitialization ------------------------------------------------------------


def init_trial(relu_scales: list[float], grad_scale: float, losses: list[float]) -> Any:
    kit = TrialKit()
    for s, loss in enumerate(losses):
        r = np.random.default_rng(s)
        tensors: dict[str, Any] = {f"fc{i}_relu_input": r.standard_normal((16, 8)) * sc
                                   for i, sc in enumerate(relu_scales)}
        tensors["gradient/fc0_weight"] = r.standard_normal((8, 8)) * grad_scale
        tensors["NLLLoss_output_0"] = loss
        kit.step(s, tensors, mode=ModeKeys.TRAIN)
    return kit.end().trial()


def test_poor_weight_initialization() -> None:
    decreasing = [2.0 - 0.1 * s for s in range(12)]
    assert run_rule(PoorWeightInitialization(init_trial([1.0, 1.2], 0.1, decreasing))) is None
    rule = PoorWeightInitialization(init_trial([1.0, 10.0], 0.1, decreasing))  # var ratio ~100
    assert run_rule(rule) == 0
    assert rule.finding is not None and rule.finding.tensor == "fc0_relu_input"
    # PyTorch's default init: variance ~6x smaller per ReLU layer (36x end to end) is healthy;
    # one 32x jump between two adjacent layers is not.
    shrink = [6.0 ** (-i / 2) for i in range(4)]
    assert run_rule(PoorWeightInitialization(init_trial(shrink, 0.1, decreasing))) is None
    jump = [1.0, 1.0, 32.0 ** 0.5, 32.0 ** 0.5]
    rule = PoorWeightInitialization(init_trial(jump, 0.1, decreasing))
    assert run_rule(rule) == 0
    assert rule.finding is not None and rule.finding.tensor == "fc1_relu_input"
    rule = PoorWeightInitialization(init_trial([1.0, 1.0], 1e-6, decreasing))
    assert run_rule(rule) == 0
    assert rule.finding is not None and rule.finding.tensor == "gradient/fc0_weight"
    stuck = [1.9, 1.95, 1.9, 1.92, 1.9, 1.92, 1.9, 1.95, 1.9, 1.93] + [1.0] * 2
    rule = PoorWeightInitialization(init_trial([1.0, 1.0], 0.1, stuck))
    assert run_rule(rule) == 9  # mean 1.92 over saves 5-9 vs 1.914 over 0-4
    assert rule.finding is not None and rule.finding.tensor == "NLLLoss_output_0"
    # A noisy but falling loss: one lucky batch (1.2 at step 1) is not beaten for 7 saves,
    # yet the mean falls from 1.72 to 1.46.
    noisy = [2.0, 1.2, 1.9, 1.8, 1.7, 1.6, 1.5, 1.5, 1.4, 1.3, 1.2, 1.1]
    assert run_rule(PoorWeightInitialization(init_trial([1.0, 1.0], 0.1, noisy))) is None
    assert run_rule(PoorWeightInitialization(init_trial([1.0, 1.0], 0.1, stuck), patience="4")) == 7
    assert run_rule(PoorWeightInitialization(init_trial([1.0, 1.0], 0.1, stuck), patience="6")) is None
    late = init_trial([1.0, 1.0], 0.1, [2.0] * 12)  # stuck, but only seen after `steps`
    assert run_rule(PoorWeightInitialization(late, steps="3")) is None
    with pytest.raises(RuleParameterError, match="steps"):
        PoorWeightInitialization(late, steps="-1")


# ---- SaturatedActivation / DeadRelu ------------------------------------------------------


def test_saturated_activation() -> None:
    healthy = np.random.default_rng(1).standard_normal((32, 10))
    saturated = healthy.copy()
    saturated[:, :6] = 12.0  # 6 of 10 tanh units always beyond 9.4999
    data: dict[int, dict[str, Any]] = {
        0: {"fc_tanh_input": healthy, "fc2_sigmoid_input": healthy * 15},
        1: {"fc_tanh_input": saturated, "fc2_sigmoid_input": healthy * 15},
        2: {"fc_tanh_input": healthy, "fc2_sigmoid_input": healthy - 30},
    }
    trial = write_trial(data)
    rule = SaturatedActivation(trial)
    assert run_rule(rule) == 1
    f = rule.finding
    assert f is not None and f.tensor == "fc_tanh_input" and f.value == pytest.approx(60.0)
    assert run_rule(SaturatedActivation(trial, threshold_layer="60")) == 2  # sigmoid: all < -23
    assert run_rule(SaturatedActivation(trial, tensor_regex="sigmoid", threshold_layer="99")) == 2
    assert run_rule(SaturatedActivation(trial, threshold_tanh_max="20", threshold_layer="60")) == 2
    with pytest.raises(RuleParameterError, match="threshold_tanh_min"):
        SaturatedActivation(trial, threshold_tanh_min="10")


def test_dead_relu() -> None:
    r = np.random.default_rng(2)
    healthy = np.maximum(r.standard_normal((32, 10)), 0)
    dead = healthy.copy()
    dead[:, :6] = 0.0
    dead[0, 0] = 1.0  # active in 1 of 32 samples (3 %): alive at the default 1 %
    data = {0: {"fc1_relu_output": healthy}, 1: {"fc1_relu_output": dead}}
    trial = write_trial(data)
    rule = DeadRelu(trial)
    assert run_rule(rule) is None  # 5 dead of 10 = 50 %, not more
    rule = DeadRelu(trial, threshold_inactivity="5")
    assert run_rule(rule) == 1
    f = rule.finding
    assert f is not None and f.tensor == "fc1_relu_output" and f.value == pytest.approx(60.0)
    assert run_rule(DeadRelu(trial, threshold_layer="40")) == 1
    assert run_rule(DeadRelu(trial, tensor_regex="other", threshold_layer="0")) is None
    with pytest.raises(RuleParameterError, match="collection_names"):
        DeadRelu(trial, collection_names="relu_output")
    with pytest.raises(RuleParameterError, match="threshold_layer"):
        DeadRelu(trial, threshold_layer="x")
