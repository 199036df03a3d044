"""Built-in rules, group B (tensor rules): TensorVariance, UnchangedTensor, SimilarAcrossRuns."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.rules.builtin.similar_across_runs import SimilarAcrossRuns
from murphy.rules.builtin.tensor_variance import TensorVariance
from murphy.rules.builtin.unchanged_tensor import UnchangedTensor
from murphy.rules.params import RuleParameterError

from .trialkit import TrialKit, run_rule, write_trial

RNG = np.random.default_rng(0)


def _w(scale: float, shape: tuple[int, ...] = (4, 4)) -> np.ndarray[Any, Any]:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# ---- TensorVariance --------------------------------------------------------------------------


def test_tensor_variance_fires_when_variance_explodes() -> None:
    data = {s: {"fc1.weight": _w(1.0), "fc2.weight": _w(1.0 if s < 3 else 100.0)} for s in range(6)}
    rule = TensorVariance(write_trial(data), max_threshold="100")
    assert run_rule(rule) == 3
    assert rule.finding is not None
    assert rule.finding.tensor == "fc2.weight"
    assert rule.finding.value is not None and rule.finding.value > 100
    assert "max_threshold 100" in rule.finding.message and "step 3" in rule.finding.message


def test_tensor_variance_min_threshold_and_selection() -> None:
    data = {s: {"a_relu_output": _w(1.0), "b_relu_output": _w(1.0 if s < 2 else 1e-4)} for s in range(4)}
    trial = write_trial(data)
    assert run_rule(TensorVariance(trial, min_threshold="1e-3", tensor_regex=".*b_relu")) == 2
    # A regex that selects only the healthy tensor: quiet.
    assert run_rule(TensorVariance(trial, min_threshold="1e-3", tensor_regex="a_relu")) is None


def test_tensor_variance_quiet_on_healthy_trial() -> None:
    data = {s: {"fc1.weight": _w(1.0), "gradient/fc1.weight": _w(0.1)} for s in range(5)}
    assert run_rule(TensorVariance(write_trial(data), max_threshold="10", min_threshold="1e-6")) is None


def test_tensor_variance_uses_stored_variance_without_raw() -> None:
    kit = TrialKit()
    for s in range(3):
        kit.step(s, {"w": np.zeros(1)}, reductions={"w": {("variance", False): 5.0 if s == 2 else 0.5}}, raw=False)
    assert run_rule(TensorVariance(kit.end().trial(), max_threshold="1")) == 2


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({}, "max_threshold and/or min_threshold"),
        ({"max_threshold": "lots"}, "max_threshold='lots'"),
        ({"max_threshold": "1", "min_threshold": "2"}, "min_threshold"),
        ({"max_threshold": "1", "tensor_regex": "(["}, "tensor_regex"),
        ({"max_threshold": "1", "treshold": "1"}, "treshold"),
    ],
)
def test_tensor_variance_bad_parameters(params: dict[str, str], needle: str) -> None:
    trial = write_trial({0: {"w": _w(1.0)}})
    with pytest.raises(RuleParameterError, match="TensorVariance") as info:
        TensorVariance(trial, **params)
    assert needle in str(info.value)


# ---- UnchangedTensor -------------------------------------------------------------------------


def test_unchanged_tensor_reference_point_fires_at_step_2() -> None:
    w = _w(1.0)
    trial = write_trial({s: {"fc.weight": w} for s in range(3)})
    rule = UnchangedTensor(trial)
    assert run_rule(rule, [0, 1]) is None
    assert run_rule(rule, [2]) == 2
    assert rule.finding is not None and rule.finding.tensor == "fc.weight"
    assert "[0, 1, 2]" in rule.finding.message


def test_unchanged_tensor_uses_saved_steps_not_consecutive_ones() -> None:
    w = _w(1.0)
    data = {0: {"fc.weight": _w(1.0)}, 10: {"fc.weight": w}, 20: {"fc.weight": w}, 30: {"fc.weight": w}}
    assert run_rule(UnchangedTensor(write_trial(data))) == 30
    assert run_rule(UnchangedTensor(write_trial(data), num_steps="2")) == 20


def test_unchanged_tensor_quiet_when_values_change_and_tolerances_apply() -> None:
    base = np.ones((3, 3), dtype=np.float32)
    data = {s: {"fc.weight": base + 1e-3 * s, "frozen": base} for s in range(5)}
    trial = write_trial(data)
    assert run_rule(UnchangedTensor(trial, tensor_regex="fc")) is None
    assert run_rule(UnchangedTensor(trial, tensor_regex="fc", atol="0.01")) == 2
    assert run_rule(UnchangedTensor(trial, collection_names="weights")) is None
    rule = UnchangedTensor(trial)
    assert run_rule(rule) == 2
    assert rule.finding is not None and rule.finding.tensor == "frozen"


def test_unchanged_tensor_ignores_weights_resting_through_an_eval_phase() -> None:
    # TRAIN 0-1 (weights move), EVAL 2-4 (weights rest, as they must), TRAIN 5-7 (move again).
    kit, base = TrialKit(), _w(1.0)
    for s in range(8):
        mode = ModeKeys.EVAL if 2 <= s <= 4 else ModeKeys.TRAIN
        scale = 3.0 if mode is ModeKeys.EVAL else 1.0 + s  # constant through EVAL
        kit.step(s, {"fc.weight": base * scale}, mode=mode)
    assert run_rule(UnchangedTensor(kit.end().trial())) is None
    # A frozen weight is still caught, from TRAIN steps only: TRAIN 0, 1, 5 are its window.
    kit, frozen = TrialKit(), _w(1.0)
    for s in range(8):
        kit.step(s, {"fc.weight": frozen}, mode=ModeKeys.EVAL if 2 <= s <= 4 else ModeKeys.TRAIN)
    rule = UnchangedTensor(kit.end().trial())
    assert run_rule(rule) == 5
    assert rule.finding is not None and "[0, 1, 5]" in rule.finding.message


def test_unchanged_tensor_equal_nan() -> None:
    v = np.array([1.0, np.nan], dtype=np.float32)
    trial = write_trial({s: {"w": v} for s in range(3)})
    assert run_rule(UnchangedTensor(trial)) is None
    assert run_rule(UnchangedTensor(trial, equal_nan="true")) == 2


@pytest.mark.parametrize(
    ("params", "needle"),
    [({"num_steps": "1"}, "num_steps"), ({"num_steps": "x"}, "num_steps"), ({"rtol": "-1"}, "rtol"),
     ({"equal_nan": "maybe"}, "equal_nan")],
)
def test_unchanged_tensor_bad_parameters(params: dict[str, str], needle: str) -> None:
    with pytest.raises(RuleParameterError, match=f"UnchangedTensor: parameter {needle}"):
        UnchangedTensor(write_trial({0: {"w": _w(1.0)}}), **params)


# ---- SimilarAcrossRuns -----------------------------------------------------------------------


def _run(seed_change_at: int | None, steps: int = 4) -> dict[int, dict[str, Any]]:
    rng = np.random.default_rng(7)
    out: dict[int, dict[str, Any]] = {}
    for s in range(steps):
        w = rng.standard_normal((3, 3)).astype(np.float32)
        g = rng.standard_normal((3, 3)).astype(np.float32)
        if seed_change_at is not None and s >= seed_change_at:
            g = g + 0.5
        out[s] = {"fc.weight": w, "gradient/fc.weight": g}
    return out


def test_similar_across_runs_fires_where_runs_diverge() -> None:
    base, other = write_trial(_run(None)), write_trial(_run(2))
    rule = SimilarAcrossRuns(base, other_trials=[other])
    assert run_rule(rule) == 2
    assert rule.finding is not None and rule.finding.tensor == "gradient/fc.weight"
    assert rule.finding.value == pytest.approx(0.5, rel=1e-5)
    # Only the weights selected: they never differ.
    assert run_rule(SimilarAcrossRuns(base, other_trials=[other], collection_names="weights")) is None


def test_similar_across_runs_quiet_for_identical_runs_and_noise() -> None:
    data = _run(None)
    noisy = {s: {k: v * np.float32(1 + 1e-7) for k, v in d.items()} for s, d in data.items()}
    rule = SimilarAcrossRuns(write_trial(data), None, [write_trial(noisy)])
    assert run_rule(rule) is None


def test_similar_across_runs_shape_difference_and_missing_steps() -> None:
    base = write_trial({0: {"w": np.zeros(3)}, 1: {"w": np.zeros(3)}, 2: {"w": np.zeros(3)}})
    other = write_trial({0: {"w": np.zeros(3)}, 2: {"w": np.zeros(4)}})
    rule = SimilarAcrossRuns(base, other_trials=[other])
    assert run_rule(rule) == 2
    assert rule.finding is not None and "shapes (3,) vs (4,)" in rule.finding.message


def test_similar_across_runs_opens_other_trial_paths(tmp_path: Any) -> None:
    TrialKit(tmp_path / "other").steps(_run(1)).end()
    rule = SimilarAcrossRuns(write_trial(_run(None)), other_trial_0=str(tmp_path / "other"))
    assert len(rule.other_trials) == 1
    assert run_rule(rule) == 1


def test_similar_across_runs_needs_other_trials() -> None:
    with pytest.raises(RuleParameterError, match="other_trial_0"):
        SimilarAcrossRuns(write_trial(_run(None)))
    with pytest.raises(RuleParameterError, match="unknown parameter"):
        SimilarAcrossRuns(write_trial(_run(None)), other_trials=[write_trial(_run(None))], rtol="1")
