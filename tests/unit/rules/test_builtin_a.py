"""Built-in rules, group A, on synthetic trials written with murphy's tensorio."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.rules.builtin.all_zero import AllZero
from murphy.rules.builtin.exploding_tensor import ExplodingTensor
from murphy.rules.builtin.loss_not_decreasing import LossNotDecreasing
from murphy.rules.builtin.overfit import Overfit
from murphy.rules.builtin.overtraining import Overtraining
from murphy.rules.builtin.vanishing_gradient import VanishingGradient
from murphy.rules.builtin.weight_update_ratio import WeightUpdateRatio
from murphy.rules.params import RuleParameterError

from .trialkit import TrialKit, run_rule, write_trial

rng = np.random.default_rng(0)


def healthy_step(s: int, scale: float = 1.0) -> dict[str, Any]:
    """A small linear model's tensors, in the PyTorch hook's write order."""
    r = np.random.default_rng(s)
    return {
        "LinearRegression_weight": r.standard_normal((1, 4)) * scale,
        "LinearRegression_bias": r.standard_normal(1),
        "MSELoss_output_0": 1.0 / (s + 1),
        "gradient/LinearRegression_weight": r.standard_normal((1, 4)) * 0.1,
        "gradient/LinearRegression_bias": r.standard_normal(1) * 0.1,
    }


# ---- ExplodingTensor ---------------------------------------------------------------------


def seed_trial(tmp_path: Any) -> Any:
    data = {s: healthy_step(s) for s in range(5)}
    for s in (2, 3, 4):
        for n in ("gradient/LinearRegression_weight", "LinearRegression_weight", "MSELoss_output_0"):
            data[s][n] = np.full_like(np.asarray(data[s][n], dtype=np.float32), np.nan)
    return write_trial(data, where=tmp_path / "seed")


def test_exploding_tensor_fires_at_seed_nan_step(tmp_path: Any) -> None:
    rule = ExplodingTensor(seed_trial(tmp_path))
    assert run_rule(rule) == 2
    f = rule.finding
    assert f is not None and f.step == 2
    assert f.tensor in ("gradient/LinearRegression_weight", "LinearRegression_weight", "MSELoss_output_0")
    assert f.tensor in f.message and "step 2" in f.message and "NaN" in f.message


def test_exploding_tensor_selection_and_only_nan() -> None:
    data = {s: healthy_step(s) for s in range(4)}
    data[1]["gradient/LinearRegression_bias"] = np.array([np.inf])
    data[3]["LinearRegression_weight"] = np.array([[np.nan, 1, 2, 3]])
    trial = write_trial(data)
    assert run_rule(ExplodingTensor(trial)) == 1
    assert run_rule(ExplodingTensor(trial, only_nan="True")) == 3
    assert run_rule(ExplodingTensor(trial, collection_names="weights")) == 3
    assert run_rule(ExplodingTensor(trial, tensor_regex="^gradient")) == 1
    assert run_rule(ExplodingTensor(trial, collection_names="losses")) is None
    assert run_rule(ExplodingTensor(trial, collection_names="no_such")) is None
    rule = ExplodingTensor(trial)
    assert rule.evaluate(1) and rule.finding is not None
    assert rule.finding.tensor == "gradient/LinearRegression_bias"
    assert rule.finding.value == 1.0 and "1 of 1" in rule.finding.message


def test_exploding_tensor_quiet_on_healthy_and_integer_tensors() -> None:
    data = {s: {**healthy_step(s), "labels": np.arange(8, dtype=np.int64)} for s in range(6)}
    assert run_rule(ExplodingTensor(write_trial(data))) is None


def test_exploding_tensor_reductions_only() -> None:
    kit = TrialKit()
    kit.step(0, {}, reductions={"gradient/fc_weight": {("mean", False): 0.1, ("max", False): 1.0}})
    kit.step(1, {}, reductions={"gradient/fc_weight": {("mean", False): np.nan, ("max", False): 1.0}})
    rule = ExplodingTensor(kit.end().trial())
    assert run_rule(rule) == 1
    assert rule.finding is not None and "reductions" in rule.finding.message


def test_exploding_tensor_bad_parameters() -> None:
    trial = write_trial({0: healthy_step(0)})
    with pytest.raises(RuleParameterError, match="only_nan"):
        ExplodingTensor(trial, only_nan="maybe")
    with pytest.raises(RuleParameterError, match=r"unknown parameter.*threshold"):
        ExplodingTensor(trial, threshold="1")
    with pytest.raises(RuleParameterError, match="tensor_regex"):
        ExplodingTensor(trial, tensor_regex="([")
    # SageMaker wiring keys are not the rule's business and are ignored
    ExplodingTensor(trial, rule_to_invoke="ExplodingTensor", other_trial_0="s3://b/x")


# ---- VanishingGradient -------------------------------------------------------------------


def test_vanishing_gradient_fires_when_gradients_shrink() -> None:
    data = {s: healthy_step(s) for s in range(6)}
    for s in (3, 4, 5):
        data[s]["gradient/LinearRegression_weight"] = np.full((1, 4), 1e-9)
        data[s]["LinearRegression_weight"] = np.zeros((1, 4))  # not a gradient: ignored
    rule = VanishingGradient(write_trial(data))
    assert run_rule(rule) == 3
    f = rule.finding
    assert f is not None and f.tensor == "gradient/LinearRegression_weight"
    assert f.value == pytest.approx(1e-9) and "1e-07" in f.message and "step 3" in f.message


def test_vanishing_gradient_threshold_and_quiet() -> None:
    trial = write_trial({s: healthy_step(s) for s in range(5)})
    assert run_rule(VanishingGradient(trial)) is None
    assert run_rule(VanishingGradient(trial, threshold="100")) == 0


def test_vanishing_gradient_uses_stored_abs_mean() -> None:
    kit = TrialKit()
    for s in range(4):
        m = 1e-3 if s < 2 else 1e-8
        kit.step(s, {}, reductions={"gradient/fc_weight": {("mean", True): m}})
    assert run_rule(VanishingGradient(kit.end().trial())) == 2


def test_vanishing_gradient_bad_parameters() -> None:
    trial = write_trial({0: healthy_step(0)})
    with pytest.raises(RuleParameterError, match="threshold='abc'"):
        VanishingGradient(trial, threshold="abc")
    with pytest.raises(RuleParameterError, match="threshold"):
        VanishingGradient(trial, threshold="-1")
    with pytest.raises(RuleParameterError, match="collection_names"):
        VanishingGradient(trial, collection_names="gradients")


# ---- LossNotDecreasing -------------------------------------------------------------------


def reference_losses() -> Any:
    """The old smdebug reference data: two losses saved at 0, 4, ... 16."""
    values = [0.3, 0.33, 0.31, 0.30, 0.28]
    return write_trial({4 * i: {"loss_0_output": v, "loss_1_output": v} for i, v in enumerate(values)},
                       collections={"losses": "loss"})


def test_loss_not_decreasing_reference_data_point() -> None:
    trial = reference_losses()
    rule = LossNotDecreasing(trial)
    assert run_rule(rule) == 12
    f = rule.finding
    assert f is not None and f.tensor == "loss_0_output" and f.value == pytest.approx(0.30)
    assert "step 12" in f.message and "step 0" in f.message and "0.1 %" in f.message
    assert run_rule(LossNotDecreasing(trial), steps=list(range(13, 17))) is None


def test_loss_not_decreasing_docs_schedule() -> None:
    # saved every 3 steps, num_steps=10: checks at 0 -> 12 -> 24 ...; started at 9: 9 -> 21 -> 33
    losses = {s: 10.0 - s / 10 for s in range(0, 40, 3)}
    losses[33] = 8.5  # step 21 has 7.9: not decreasing at the check 33 (compares with 21)
    trial = write_trial({s: {"CrossEntropyLoss_output_0": v} for s, v in losses.items()})
    rule = LossNotDecreasing(trial, increase_threshold_percent="100")
    assert run_rule(rule, steps=list(range(9, 40))) == 33
    assert rule.finding is not None and "step 21" in rule.finding.message
    # from step 0 the checks are 12, 24, 36: 36 (6.4) < 24 (7.6), quiet
    assert run_rule(LossNotDecreasing(trial, increase_threshold_percent="100")) is None


def test_loss_not_decreasing_increase_cap_after_first_check() -> None:
    losses = [1.0, 0.9, 0.8, 0.7, 0.6, 0.9, 0.5]  # check at 2 (num_steps=2) passes; 5 jumps
    trial = write_trial({s: {"MSELoss_output_0": v} for s, v in enumerate(losses)})
    rule = LossNotDecreasing(trial, num_steps="2")
    assert run_rule(rule) == 5
    assert rule.finding is not None and "rose more than 5 %" in rule.finding.message
    assert "vs 0.7 at step 3" in rule.finding.message  # num_steps back, not the last check (4)
    # A rise between checks is measured over num_steps: 1.0 at step 5 is 5.3 % over step 4
    # (the last check, 0.95) but below step 3 (1.0 * 1.05): no fire before the check at 6.
    wobble = [1.2, 1.1, 1.0, 1.0, 0.95, 1.0, 0.9]
    trial = write_trial({s: {"MSELoss_output_0": v} for s, v in enumerate(wobble)})
    assert run_rule(LossNotDecreasing(trial, num_steps="2")) is None
    assert run_rule(LossNotDecreasing(trial, num_steps="2", increase_threshold_percent="100")) is None


def test_loss_not_decreasing_mode_order_and_collections() -> None:
    kit = TrialKit()
    train = [1.0 - 0.01 * i for i in range(30)]  # decreasing
    for i in range(30):
        kit.step(2 * i, {"NLLLoss_output_0": train[i]}, mode=ModeKeys.TRAIN)
        kit.step(2 * i + 1, {"NLLLoss_output_0": 2.0, "custom": float(i)}, mode=ModeKeys.EVAL)
    trial = kit.end().trial()
    rule = LossNotDecreasing(trial)  # EVAL first: flat eval loss fires at EVAL step 10
    assert run_rule(rule) == 21
    assert rule.finding is not None and "EVAL step 10" in rule.finding.message
    assert run_rule(LossNotDecreasing(trial, mode="TRAIN")) is None
    # GLOBAL mixes both. Checks fall on TRAIN saves (10, 20, ...) and pass; between checks
    # each save is compared with the one 10 steps back, an EVAL save with an EVAL save: no rise.
    assert run_rule(LossNotDecreasing(trial, mode="global")) is None
    assert run_rule(LossNotDecreasing(trial, mode="global", num_steps="9")) == 9  # EVAL 2.0 vs 1.0
    only_custom = LossNotDecreasing(trial, use_losses_collection="false", tensor_regex="custom", mode="EVAL")
    assert run_rule(only_custom) == 21
    assert only_custom.finding is not None and only_custom.finding.tensor == "custom"


def test_loss_not_decreasing_quiet_on_decreasing_loss() -> None:
    trial = write_trial({s: {"MSELoss_output_0": 2.0 * 0.97**s} for s in range(60)})
    assert run_rule(LossNotDecreasing(trial)) is None
    assert run_rule(LossNotDecreasing(trial, diff_percent="50")) == 10


def test_loss_not_decreasing_bad_parameters() -> None:
    trial = reference_losses()
    for kwargs, name in [({"num_steps": "ten"}, "num_steps"), ({"num_steps": "0"}, "num_steps"),
                         ({"diff_percent": "x"}, "diff_percent"), ({"mode": "TRAINING"}, "mode"),
                         ({"use_losses_collection": "nope"}, "use_losses_collection"),
                         ({"increase_threshold_percent": "-1"}, "increase_threshold_percent"),
                         ({"patience": "3"}, "patience")]:
        with pytest.raises(RuleParameterError, match=name):
            LossNotDecreasing(trial, **kwargs)
    with pytest.raises(RuleParameterError, match="no loss tensors"):
        LossNotDecreasing(trial, use_losses_collection="False")


# ---- Overfit / Overtraining --------------------------------------------------------------


def train_eval_trial(train: list[float], val: list[float], per_phase: int = 2) -> Any:
    """Alternating phases: ``per_phase`` TRAIN saves then ``per_phase`` EVAL saves per epoch."""
    kit, g = TrialKit(), 0
    for t, v in zip(train, val, strict=True):
        for _ in range(per_phase):
            kit.step(g, {"CrossEntropyLoss_output_0": t}, mode=ModeKeys.TRAIN)
            g += 1
        for _ in range(per_phase):
            kit.step(g, {"CrossEntropyLoss_output_0": v}, mode=ModeKeys.EVAL)
            g += 1
    return kit.end().trial()


def test_overfit_fires_when_val_loss_departs() -> None:
    train = [1.0, 0.8, 0.6, 0.4, 0.3, 0.2]
    val = [1.05, 0.85, 0.62, 0.6, 0.7, 0.8]  # ratio > 0.1 from epoch 3 on (EVAL steps 14, 15)
    trial = train_eval_trial(train, val)
    rule = Overfit(trial)
    assert run_rule(rule) == 15  # the pass 14-15 is judged once complete, at its last step
    f = rule.finding
    assert f is not None and f.tensor == "CrossEntropyLoss_output_0" and f.value == pytest.approx(0.5)
    assert "step 15" in f.message and "2 evaluation batch(es)" in f.message
    assert run_rule(Overfit(trial, patience="3")) == 23  # passes ending 15, 19, 23
    assert run_rule(Overfit(trial, start_step="19")) == 19
    assert run_rule(Overfit(trial, ratio_threshold="5")) is None
    assert run_rule(Overfit(trial, tensor_regex="nothing_matches")) is None


def test_overfit_averages_every_batch_of_an_evaluation_pass() -> None:
    # Train 1.0 (steady); each pass has 3 batches. Pass 1: 1.3, 1.0, 0.9 (mean 1.067: ratio
    # 0.067, although its first batch alone is 0.3 over); pass 2: 1.2, 1.2, 1.2 (ratio 0.2).
    kit, g = TrialKit(), 0
    for batches in ([1.3, 1.0, 0.9], [1.2, 1.2, 1.2]):
        for _ in range(3):
            kit.step(g, {"CrossEntropyLoss_output_0": 1.0}, mode=ModeKeys.TRAIN)
            g += 1
        for v in batches:
            kit.step(g, {"CrossEntropyLoss_output_0": v}, mode=ModeKeys.EVAL)
            g += 1
    trial = kit.end().trial()
    rule = Overfit(trial)
    assert run_rule(rule) == 11  # the last batch of pass 2
    assert rule.finding is not None and rule.finding.value == pytest.approx(0.2)


def test_overfit_judges_a_pass_in_a_live_trial_once_it_is_known_complete() -> None:
    kit = TrialKit()
    for g in range(3):
        kit.step(g, {"CrossEntropyLoss_output_0": 1.0}, mode=ModeKeys.TRAIN)
    kit.step(3, {"CrossEntropyLoss_output_0": 1.5}, mode=ModeKeys.EVAL)
    rule = Overfit(kit.trial())
    assert not rule.evaluate(3)  # the pass may go on: training has not ended, no later step
    kit.step(4, {"CrossEntropyLoss_output_0": 1.5}, mode=ModeKeys.EVAL)
    kit.step(5, {"CrossEntropyLoss_output_0": 1.0}, mode=ModeKeys.TRAIN)
    rule.base_trial.refresh()
    assert rule.evaluate(4)  # the next step is TRAIN: the pass 3-4 is complete, judged at 4
    assert rule.finding is not None and "2 evaluation batch(es)" in rule.finding.message
    late = Overfit(rule.base_trial)
    assert not late.evaluate(3) and late.evaluate(5)  # 4 skipped: judged at the TRAIN step
    assert late.finding is not None and "at step 4" in late.finding.message
    assert not late.evaluate(5)  # a pass is judged once


def test_overfit_ignores_a_gap_within_minibatch_noise() -> None:
    # Train losses 0.3/0.5 alternating (mean 0.4, SE ~0.045); val 0.46: ratio 0.15 > 0.1 but
    # the gap 0.06 is within 3 standard errors. Val 0.7 is far outside.
    kit, g = TrialKit(), 0
    for val in (0.46, 0.46, 0.7):
        for i in range(6):
            kit.step(g, {"CrossEntropyLoss_output_0": 0.3 if i % 2 else 0.5}, mode=ModeKeys.TRAIN)
            g += 1
        kit.step(g, {"CrossEntropyLoss_output_0": val}, mode=ModeKeys.EVAL)
        g += 1
    assert run_rule(Overfit(kit.end().trial())) == 20


def test_overfit_quiet_when_losses_track() -> None:
    train = [1.0, 0.8, 0.6, 0.4, 0.3, 0.2]
    assert run_rule(Overfit(train_eval_trial(train, [t * 1.05 for t in train]))) is None


def test_overtraining_train_and_validation_patience() -> None:
    train = [1.0, 0.8, 0.6] + [0.5] * 11
    val = [1.0 - 0.07 * e for e in range(14)]
    trial = train_eval_trial(train, val, per_phase=1)
    # The validation loss keeps improving: the training plateau alone is not overtraining.
    assert run_rule(Overtraining(trial)) is None
    flat = train_eval_trial(train, [0.5] * 14, per_phase=1)
    # Running means of 5 training saves: 1, .9, .8, .725, .68, .58, .52, .5 (epoch 7, the last
    # improvement by > 0.01), then .5 at epochs 8..12: 5 stale saves -> epoch 12 = step 24.
    rule = Overtraining(flat, patience_validation="20")
    assert run_rule(rule) == 24
    assert rule.finding is not None and "training loss" in rule.finding.message
    assert "validation loss has not improved" in rule.finding.message
    assert run_rule(Overtraining(flat, patience_train="20", patience_validation="20")) is None
    flat_val = train_eval_trial(val[:10], [0.5] * 10, per_phase=1)
    rule = Overtraining(flat_val, patience_validation="3")
    assert run_rule(rule) == 7  # EVAL saves at 1, 3, 5, 7: stale at 3, 5, 7
    assert rule.finding is not None and "validation loss" in rule.finding.message
    assert run_rule(Overtraining(flat_val, patience_validation="20")) is None
    with pytest.raises(RuleParameterError, match="delta"):
        Overtraining(flat_val, delta="-1")


def test_overtraining_judges_noisy_training_losses_by_their_running_mean() -> None:
    # A per-batch loss still falling 0.02 per save, with +-0.05 noise and one lucky batch at
    # save 5 (0.3 below the trend). Against that single batch the loss would not "improve"
    # for the next ~15 saves; its running mean keeps improving.
    losses = [2.0 - 0.02 * t + (0.05 if t % 2 else -0.05) - (0.3 if t == 5 else 0.0) for t in range(40)]
    trial = write_trial({t: {"CrossEntropyLoss_output_0": v} for t, v in enumerate(losses)},
                        mode=ModeKeys.TRAIN)
    assert run_rule(Overtraining(trial)) is None
    flat = write_trial({t: {"CrossEntropyLoss_output_0": v}
                        for t, v in enumerate(losses[:20] + [losses[19]] * 20)}, mode=ModeKeys.TRAIN)
    assert run_rule(Overtraining(flat)) is not None


def test_overtraining_waits_for_a_full_window_of_training_saves() -> None:
    # One lucky first batch (0.8), then a loss falling 0.02 per save. A mean of the first
    # 1-4 saves would be a "best" the full 5-save means need 5 saves to beat.
    losses = [0.8] + [1.0 - 0.02 * t for t in range(20)]
    trial = write_trial({t: {"CrossEntropyLoss_output_0": v} for t, v in enumerate(losses)},
                        mode=ModeKeys.TRAIN)
    assert run_rule(Overtraining(trial)) is None
    flat = write_trial({t: {"CrossEntropyLoss_output_0": 0.5} for t in range(12)}, mode=ModeKeys.TRAIN)
    assert run_rule(Overtraining(flat)) == 9  # first mean at 4, then 5 stale saves


def test_overfit_overtraining_bad_parameters() -> None:
    trial = train_eval_trial([1.0], [1.0])
    with pytest.raises(RuleParameterError, match="patience"):
        Overfit(trial, patience="0")
    with pytest.raises(RuleParameterError, match="ratio_threshold"):
        Overfit(trial, ratio_threshold="high")
    with pytest.raises(RuleParameterError, match="patience_train"):
        Overtraining(trial, patience_train="1.5")
    with pytest.raises(RuleParameterError, match="unknown parameter"):
        Overtraining(trial, patience="3")


# ---- AllZero -----------------------------------------------------------------------------


def test_all_zero() -> None:
    data = {s: healthy_step(s) for s in range(4)}
    data[2]["gradient/LinearRegression_bias"] = np.zeros(1)
    w = np.ones((1, 4))
    w[0, :3] = 0
    data[1]["LinearRegression_weight"] = w  # 75 % zeros
    trial = write_trial(data)
    rule = AllZero(trial)
    assert run_rule(rule) == 2
    assert rule.finding is not None and rule.finding.tensor == "gradient/LinearRegression_bias"
    assert run_rule(AllZero(trial, threshold="70")) == 1
    assert run_rule(AllZero(trial, collection_names="weights")) is None
    assert run_rule(AllZero(trial, collection_names="weights", threshold="75")) == 1
    assert run_rule(AllZero(write_trial({s: healthy_step(s) for s in range(3)}))) is None
    with pytest.raises(RuleParameterError, match="threshold"):
        AllZero(trial, threshold="101")


# ---- WeightUpdateRatio -------------------------------------------------------------------


def weights_trial(updates: dict[int, float], steps: int = 6) -> Any:
    """TRAIN saves of one weight; ``updates[s]`` is the relative update applied at step s."""
    kit, w = TrialKit(), np.ones((4, 4))
    for s in range(steps):
        w = w + updates.get(s, 1e-3) * np.eye(4) * 2  # ||eye*2|| = 4 = ||ones||
        kit.step(2 * s, {"fc_weight": w.copy(), "fc_bias": np.zeros(4)}, mode=ModeKeys.TRAIN)
        kit.step(2 * s + 1, {"fc_weight": w.copy()}, mode=ModeKeys.EVAL)
    return kit.end().trial()


def test_weight_update_ratio_large_and_small() -> None:
    rule = WeightUpdateRatio(weights_trial({3: 100.0}))
    assert run_rule(rule) == 6
    f = rule.finding
    assert f is not None and f.tensor == "fc_weight" and f.value is not None and f.value > 10
    assert "large_threshold" in f.message
    rule = WeightUpdateRatio(weights_trial({4: 0.0}))
    assert run_rule(rule) == 8
    assert rule.finding is not None and rule.finding.value == 0.0 and "small_threshold" in rule.finding.message
    assert run_rule(WeightUpdateRatio(weights_trial({}))) is None  # EVAL copies are not updates
    assert run_rule(WeightUpdateRatio(weights_trial({}), small_threshold="0.01")) == 2
    # num_steps=2: the ratio over two TRAIN steps, first possible at TRAIN step 2 (global 4)
    assert run_rule(WeightUpdateRatio(weights_trial({}), num_steps="2", small_threshold="0.0015")) is None
    assert run_rule(WeightUpdateRatio(weights_trial({}), num_steps="2", small_threshold="0.01")) == 4


def test_weight_update_ratio_bad_parameters() -> None:
    trial = weights_trial({}, steps=1)
    with pytest.raises(RuleParameterError, match="num_steps"):
        WeightUpdateRatio(trial, num_steps="0")
    with pytest.raises(RuleParameterError, match="small_threshold"):
        WeightUpdateRatio(trial, small_threshold="20")
    with pytest.raises(RuleParameterError, match="epsilon"):
        WeightUpdateRatio(trial, epsilon="tiny")
