"""Built-in rules, group B (data rules): ClassImbalance, Confusion, NLPSequenceRatio,
CheckInputImages."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.rules.builtin.check_input_images import CheckInputImages
from murphy.rules.builtin.class_imbalance import ClassImbalance, class_indices
from murphy.rules.builtin.confusion import Confusion
from murphy.rules.builtin.nlp_sequence_ratio import NLPSequenceRatio
from murphy.rules.params import RuleParameterError

from .trialkit import run_rule, write_trial

Array = np.ndarray[Any, Any]


def _logits(pred: Array, classes: int) -> Array:
    out = np.zeros((pred.size, classes), dtype=np.float32)
    out[np.arange(pred.size), pred] = 5.0
    return out


def _batches(labels: list[Array], preds: list[Array], classes: int = 3, logits: bool = False) -> Any:
    return write_trial({
        s: {"labels": lab.astype(np.int64), "predictions": _logits(p, classes) if logits else p.astype(np.int64)}
        for s, (lab, p) in enumerate(zip(labels, preds, strict=True))
    })


# ---- class_indices ---------------------------------------------------------------------------


def test_class_indices_handles_logits_one_hot_and_ids() -> None:
    lab = np.array([0, 2, 1])
    got_l, got_p = class_indices(lab, _logits(np.array([0, 1, 1]), 3), argmax=False)
    assert got_l.tolist() == [0, 2, 1] and got_p is not None and got_p.tolist() == [0, 1, 1]
    one_hot = _logits(lab, 3)
    got_l, got_p = class_indices(one_hot, one_hot, argmax=True)
    assert got_l.tolist() == [0, 2, 1] and got_p is not None and got_p.tolist() == [0, 2, 1]
    _, got_p = class_indices(lab, np.array([1, 1]), argmax=False)
    assert got_p is None


# ---- ClassImbalance --------------------------------------------------------------------------


def test_class_imbalance_fires_once_enough_skewed_labels_are_seen() -> None:
    # 100 labels per step: 95 of class 0, 5 of class 1 (ratio 19 > 10); predictions perfect.
    lab = np.array([0] * 95 + [1] * 5)
    trial = _batches([lab] * 8, [lab] * 8)
    rule = ClassImbalance(trial)
    assert run_rule(rule) == 4  # 500 labels reached at step 4
    assert rule.finding is not None and rule.finding.tensor == "labels"
    assert rule.finding.value == pytest.approx(19.0)
    assert "threshold_imbalance 10" in rule.finding.message
    assert run_rule(ClassImbalance(trial, samples="100")) == 0
    assert run_rule(ClassImbalance(trial, threshold_imbalance="20")) is None


def test_class_imbalance_quiet_on_balanced_labels_even_with_an_untrained_model() -> None:
    rng = np.random.default_rng(1)
    labels = [rng.integers(0, 10, 100) for _ in range(10)]
    preds = [rng.integers(0, 10, 100) for _ in range(10)]  # random: ~90 % wrong for every class
    assert run_rule(ClassImbalance(_batches(labels, preds, classes=10))) is None


def test_class_imbalance_fires_when_an_underrepresented_class_is_neglected() -> None:
    rng = np.random.default_rng(2)
    # Class 3 has ~10 % of the labels (ratio ~3 < threshold_imbalance, but underrepresented).
    labels = [rng.choice(4, 100, p=[0.3, 0.3, 0.3, 0.1]) for _ in range(10)]
    # From step 6 the model never predicts class 3 (it says 0 instead); others are right.
    preds = [np.where((lab == 3) & (s >= 6), 0, lab) for s, lab in enumerate(labels)]
    rule = ClassImbalance(_batches(labels, preds, classes=4, logits=True))
    step = run_rule(rule)
    # The window holds the latest 500 samples (5 steps): at step 8 class 3 is wrong in 3 of
    # them (~0.6), at step 9 in 4 of 5 (~0.8 > 0.7).
    assert step == 9
    assert rule.finding is not None and "class 3" in rule.finding.message
    assert rule.finding.value is not None and rule.finding.value > 0.7
    # The same neglect of a class that is not underrepresented is not an imbalance.
    balanced = [rng.integers(0, 4, 100) for _ in range(10)]
    preds = [np.where((lab == 3) & (s >= 6), 0, lab) for s, lab in enumerate(balanced)]
    assert run_rule(ClassImbalance(_batches(balanced, preds, classes=4, logits=True))) is None


def test_class_imbalance_quiet_when_an_early_model_ignores_one_class_but_is_bad_on_all() -> None:
    # Balanced labels; an early model never predicts class 3 and is right only half the time on
    # the others (what healthy training looks like at step 5): no class is singled out.
    rng = np.random.default_rng(3)
    labels = [rng.integers(0, 4, 100) for _ in range(10)]
    preds = [np.where(lab == 3, 0, np.where(rng.random(100) < 0.5, lab, (lab + 1) % 3)) for lab in labels]
    assert run_rule(ClassImbalance(_batches(labels, preds, classes=4))) is None


def test_class_imbalance_counts_each_step_once() -> None:
    lab = np.array([0] * 95 + [1] * 5)
    rule = ClassImbalance(_batches([lab] * 5, [lab] * 5))
    for _ in range(10):
        assert not rule.evaluate(0)  # re-evaluating step 0 must not count it again
    assert sum(rule.counts.values()) == 100


@pytest.mark.parametrize(
    ("params", "needle"),
    [({"threshold_imbalance": "ten"}, "threshold_imbalance"), ({"threshold_misprediction": "1.5"}, "threshold_misprediction"),
     ({"samples": "0"}, "samples"), ({"argmax": "sure"}, "argmax"), ({"labels_regex": "(("}, "labels_regex")],
)
def test_class_imbalance_bad_parameters(params: dict[str, str], needle: str) -> None:
    lab = np.array([0, 1])
    with pytest.raises(RuleParameterError, match=f"ClassImbalance: parameter {needle}"):
        ClassImbalance(_batches([lab], [lab]), **params)


# ---- Confusion -------------------------------------------------------------------------------


def test_confusion_fires_on_the_first_bad_matrix() -> None:
    lab = np.repeat(np.arange(3), 20)
    bad = lab.copy()
    bad[:8] = 1  # 8 of class 0 predicted as 1: column 1 has 28 samples, 20 right (0.71 < 0.9)
    trial = _batches([lab, lab, lab, lab], [lab, lab, bad, lab])
    rule = Confusion(trial)
    assert run_rule(rule) == 2
    assert rule.finding is not None and rule.finding.tensor == "predictions"
    assert rule.finding.value == pytest.approx(20 / 28)
    assert "class 1" in rule.finding.message and "min_diag 0.9" in rule.finding.message
    # Loose bounds: quiet.
    assert run_rule(Confusion(trial, min_diag="0.5", max_off_diag="0.5")) is None


def test_confusion_off_diagonal_bound_and_logits() -> None:
    lab = np.repeat(np.arange(3), 20)
    pred = lab.copy()
    pred[:3] = 2  # column 2: 20 right + 3 of class 0 = 0.13 off-diagonal share
    trial = _batches([lab, lab], [lab, pred], logits=True)
    rule = Confusion(trial, min_diag="0.5")
    assert run_rule(rule) == 1
    assert rule.finding is not None and "cm[0][2]" in rule.finding.message
    assert run_rule(Confusion(trial, min_diag="0.5", max_off_diag="0.2")) is None


def test_confusion_quiet_on_good_predictions_and_uses_collections() -> None:
    lab = np.repeat(np.arange(4), 10)
    data = {s: {"y_true": lab, "y_pred": lab} for s in range(3)}
    trial = write_trial(data, mode=ModeKeys.EVAL, collections={"labels": "y_true", "predictions": "y_pred"})
    assert run_rule(Confusion(trial)) is None
    bad = {s: {"y_true": lab, "y_pred": (lab + (s == 2)) % 4} for s in range(3)}
    trial = write_trial(bad, collections={"labels": "y_true", "predictions": "y_pred"})
    assert run_rule(Confusion(trial)) == 2


def test_confusion_ignores_columns_with_few_samples() -> None:
    lab = np.array([0] * 20 + [1] * 20 + [2] * 3)
    pred = lab.copy()
    pred[0] = 2  # column 2: 3 right of 4 (0.75), too few samples to judge
    assert run_rule(Confusion(_batches([lab], [pred]))) is None
    pred[1] = 2  # column 2: 3 right of 5 (0.6): judged now
    assert run_rule(Confusion(_batches([lab], [pred]))) == 0


def test_confusion_category_no_checks_ids() -> None:
    lab = np.repeat(np.arange(3), 10)
    rule = Confusion(_batches([lab], [lab]), category_no="2")
    with pytest.raises(RuleParameterError, match=r"outside 0\.\.1"):
        rule.evaluate(0)
    with pytest.raises(RuleParameterError, match="Confusion: parameter min_diag"):
        Confusion(_batches([lab], [lab]), min_diag="2")
    with pytest.raises(RuleParameterError, match="Confusion: parameter category_no"):
        Confusion(_batches([lab], [lab]), category_no="three")


# ---- NLPSequenceRatio ------------------------------------------------------------------------


def _sequences(pad_fraction: float, rng: np.random.Generator) -> Array:
    seq = rng.integers(1, 1000, (8, 50))
    seq[:, int(50 * (1 - pad_fraction)):] = 0
    return seq.astype(np.int64)


def test_nlp_sequence_ratio_fires_on_mostly_padding_batch() -> None:
    rng = np.random.default_rng(3)
    data = {s: {"embedding0_input_0": _sequences(0.6 if s == 3 else 0.2, rng)} for s in range(5)}
    rule = NLPSequenceRatio(write_trial(data))
    assert run_rule(rule) == 3
    assert rule.finding is not None and rule.finding.tensor == "embedding0_input_0"
    assert rule.finding.value == pytest.approx(60.0)
    assert "token 0" in rule.finding.message


def test_nlp_sequence_ratio_several_tokens_and_quiet() -> None:
    rng = np.random.default_rng(4)
    data = {s: {"model.embedding0_input_0": _sequences(0.2, rng)} for s in range(3)}
    data[2]["model.embedding0_input_0"][:, :30] = 7
    trial = write_trial(data)
    assert run_rule(NLPSequenceRatio(trial, token_values="7")) == 2
    assert run_rule(NLPSequenceRatio(trial, token_values="0,7", token_thresholds_percent="50,70")) is None
    assert run_rule(NLPSequenceRatio(trial, token_values="0,7", token_thresholds_percent="10,70")) == 0


@pytest.mark.parametrize(
    ("params", "needle"),
    [({"token_values": "0,1", "token_thresholds_percent": "1,2,3"}, "one threshold per token"),
     ({"token_values": "pad"}, "token_values"), ({"token_thresholds_percent": "150"}, "token_thresholds_percent"),
     ({"token_values": ""}, "token_values is empty")],
)
def test_nlp_sequence_ratio_bad_parameters(params: dict[str, str], needle: str) -> None:
    trial = write_trial({0: {"embedding0_input_0": np.zeros((2, 3))}})
    with pytest.raises(RuleParameterError, match="NLPSequenceRatio") as info:
        NLPSequenceRatio(trial, **params)
    assert needle in str(info.value)


# ---- CheckInputImages ------------------------------------------------------------------------


def _images(mean: float, rng: np.random.Generator, n: int = 100, channels_last: bool = False) -> Array:
    shape = (n, 8, 8, 3) if channels_last else (n, 3, 8, 8)
    return (rng.standard_normal(shape) * 0.5 + mean).astype(np.float32)


def test_check_input_images_fires_after_threshold_samples() -> None:
    rng = np.random.default_rng(5)
    data = {s: {"hybridsequential0_input_0": _images(0.45, rng)} for s in range(8)}
    rule = CheckInputImages(write_trial(data))
    assert run_rule(rule) == 4  # 500 images after step 4
    assert rule.finding is not None and rule.finding.value is not None
    assert rule.finding.value == pytest.approx(0.45, abs=0.02)
    assert "threshold_mean 0.2" in rule.finding.message


def test_check_input_images_quiet_on_normalised_inputs() -> None:
    rng = np.random.default_rng(6)
    data = {s: {"hybridsequential0_input_0": _images(0.0, rng)} for s in range(8)}
    assert run_rule(CheckInputImages(write_trial(data))) is None


def test_check_input_images_one_bad_channel_channels_last() -> None:
    rng = np.random.default_rng(7)
    data = {}
    for s in range(3):
        img = _images(0.0, rng, channels_last=True)
        img[..., 2] += 0.5
        data[s] = {"conv_input_0": img}
    trial = write_trial(data)
    rule = CheckInputImages(trial, regex="conv_input", channel="-1", threshold_samples="200")
    assert run_rule(rule) == 1
    assert rule.finding is not None and "channel 2" in rule.finding.message
    with pytest.raises(RuleParameterError, match="channel=1 is not a colour axis"):
        CheckInputImages(write_trial({0: {"x_input_0": np.zeros(4)}}), regex="x_input").evaluate(0)


@pytest.mark.parametrize(
    ("params", "needle"),
    [({"threshold_mean": "high"}, "threshold_mean"), ({"threshold_samples": "-5"}, "threshold_samples"),
     ({"channel": "0"}, "channel"), ({"regex": "(("}, "regex")],
)
def test_check_input_images_bad_parameters(params: dict[str, str], needle: str) -> None:
    with pytest.raises(RuleParameterError, match=f"CheckInputImages: parameter {needle}"):
        CheckInputImages(write_trial({0: {"x": np.zeros(2)}}), **params)
