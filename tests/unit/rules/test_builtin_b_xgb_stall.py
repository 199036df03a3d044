"""Built-in rules, group B: FeatureImportanceOverweight, TreeDepth (XGBoost tensors) and
StalledTrainingRule."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from murphy.rules.builtin.feature_importance_overweight import FeatureImportanceOverweight
from murphy.rules.builtin.stalled_training_rule import StalledTrainingRule, step_wall_time
from murphy.rules.builtin.tree_depth import TreeDepth, node_depth
from murphy.rules.params import RuleParameterError
from murphy.tensorio.writer import StepWriter

from .trialkit import TrialKit, run_rule, write_trial

# ---- FeatureImportanceOverweight -------------------------------------------------------------


def _importances(weights: list[float], kind: str = "weight") -> dict[str, Any]:
    total = sum(weights)
    return {f"feature_importance/{kind}/f{i}": np.float64(w / total) for i, w in enumerate(weights)}


def test_feature_importance_overweight_fires_when_top_features_dominate() -> None:
    balanced = [1.0] * 8
    skewed = [10.0, 5.0, 3.0, 0.5, 0.5, 0.5, 0.5]  # top 3: 18/20 = 0.9
    data = {0: _importances(balanced), 1: _importances(balanced), 2: _importances(skewed)}
    data[2].update(_importances(balanced, "gain"))
    rule = FeatureImportanceOverweight(write_trial(data))
    assert run_rule(rule) == 2
    assert rule.finding is not None and rule.finding.tensor == "feature_importance/weight/f0"
    assert rule.finding.value == pytest.approx(0.9)
    assert "threshold 0.8" in rule.finding.message
    trial = write_trial(data)
    assert run_rule(FeatureImportanceOverweight(trial, threshold="0.95")) is None
    assert run_rule(FeatureImportanceOverweight(trial, tensor_regex="feature_importance/gain")) is None
    assert run_rule(FeatureImportanceOverweight(trial, nfeatures="1", threshold="0.4")) == 2


def test_feature_importance_overweight_needs_more_features_than_nfeatures() -> None:
    trial = write_trial({0: _importances([5.0, 1.0, 1.0])})
    assert run_rule(FeatureImportanceOverweight(trial)) is None
    assert run_rule(FeatureImportanceOverweight(trial, nfeatures="1")) is None  # 5/7 = 0.71
    assert run_rule(FeatureImportanceOverweight(trial, nfeatures="1", threshold="0.7")) == 0


@pytest.mark.parametrize(
    ("params", "needle"),
    [({"threshold": "2"}, "threshold"), ({"nfeatures": "0"}, "nfeatures"), ({"nfeatures": "two"}, "nfeatures")],
)
def test_feature_importance_overweight_bad_parameters(params: dict[str, str], needle: str) -> None:
    with pytest.raises(RuleParameterError, match=f"FeatureImportanceOverweight: parameter {needle}"):
        FeatureImportanceOverweight(write_trial({0: _importances([1.0])}), **params)


# ---- TreeDepth -------------------------------------------------------------------------------


def _tree(depth: int, tree: int = 0) -> dict[str, Any]:
    nodes = np.arange(2 ** (depth + 1) - 1, dtype=np.int64)  # a complete tree, breadth-first
    return {"trees/Tree": np.full(nodes.size, tree, dtype=np.int64), "trees/Node": nodes,
            "trees/Gain": np.ones(nodes.size)}


def test_node_depth() -> None:
    assert [node_depth(i) for i in (0, 1, 2, 3, 6, 7, 14, 30)] == [0, 1, 1, 2, 2, 3, 3, 4]


def test_tree_depth_fires_when_trees_stop_short() -> None:
    data = {0: _tree(6), 1: _tree(5, 1), 2: _tree(3, 2), 3: _tree(2, 3)}
    rule = TreeDepth(write_trial(data))
    assert run_rule(rule) == 2
    assert rule.finding is not None and rule.finding.tensor == "trees/Node"
    assert rule.finding.value == 3.0
    assert "depth 4" in rule.finding.message
    trial = write_trial(data)
    assert run_rule(TreeDepth(trial, depth="3")) == 3
    assert run_rule(TreeDepth(trial, depth="2")) is None


def test_tree_depth_takes_the_deepest_tree_of_a_round() -> None:
    a, b = _tree(2, 0), _tree(5, 1)
    both = {k: np.concatenate([a[k], b[k]]) for k in a}
    assert run_rule(TreeDepth(write_trial({0: both}))) is None
    # Without trees/Tree all nodes count as one tree: its largest id decides.
    assert run_rule(TreeDepth(write_trial({0: {"trees/Node": both["trees/Node"]}}))) is None
    assert run_rule(TreeDepth(write_trial({0: {"trees/Node": a["trees/Node"]}}))) == 0


def test_tree_depth_bad_parameters() -> None:
    for bad in ("deep", "-1"):
        with pytest.raises(RuleParameterError, match="TreeDepth: parameter depth"):
            TreeDepth(write_trial({0: _tree(1)}), depth=bad)


# ---- StalledTrainingRule ---------------------------------------------------------------------

T0 = 1_700_000_000.0


def _write(kit: TrialKit, step: int, wall: float) -> None:
    with StepWriter(kit.store, step) as w:
        w.add("loss_output_0", np.float32(1.0 / (step + 1)), wall_time=wall)
        w.add("fc.weight", np.ones(3, dtype=np.float32), wall_time=wall + 0.5)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_stalled_training_finds_a_gap_in_a_finished_run() -> None:
    kit = TrialKit()
    walls = [T0, T0 + 60, T0 + 120, T0 + 120 + 2000, T0 + 2200]
    for s, wall in enumerate(walls):
        _write(kit, s, wall)
    trial = kit.end().trial()
    assert step_wall_time(trial, 3) == pytest.approx(walls[3])
    rule = StalledTrainingRule(trial)
    assert run_rule(rule) == 3
    assert rule.finding is not None and rule.finding.value == pytest.approx(2000.0)
    assert "between step 2 and step 3" in rule.finding.message and "1800" in rule.finding.message
    assert run_rule(StalledTrainingRule(trial, threshold="2500")) is None
    # A finished run is never "stalled now".
    assert not rule.check_stalled(now=T0 + 1e6)


def test_stalled_training_while_waiting_for_steps() -> None:
    kit = TrialKit()
    _write(kit, 0, T0)
    _write(kit, 1, T0 + 10)
    clock = Clock(T0 + 11)
    rule = StalledTrainingRule(kit.trial(), threshold="100", clock=clock)
    assert run_rule(rule) is None
    assert not rule.check_stalled(T0 + 10 + 99)
    assert rule.check_stalled(T0 + 10 + 101)
    assert rule.finding is not None and rule.finding.step == 1
    assert "after step 1" in rule.finding.message and "threshold 100" in rule.finding.message
    assert not rule.check_stalled(T0 + 10 + 150)  # reported once per stall
    _write(kit, 2, T0 + 200)  # training resumes: progress seen on the next tick
    rule.base_trial.refresh()  # the engine's wait loop refreshes; the test is faster than polling
    clock.now = T0 + 300
    assert not rule.check_stalled(T0 + 300)
    assert not rule.check_stalled(T0 + 399)
    assert rule.check_stalled(T0 + 401)
    kit.end()
    rule.base_trial.refresh()
    assert not rule.check_stalled(T0 + 1e6)


def test_stalled_training_before_any_step() -> None:
    clock = Clock(T0)
    rule = StalledTrainingRule(TrialKit().trial(), threshold="60", clock=clock)
    assert not rule.check_stalled(T0 + 59)
    assert rule.check_stalled(T0 + 61)
    assert rule.finding is not None and "before any step" in rule.finding.message


@pytest.mark.parametrize(
    ("params", "needle"),
    [({"threshold": "0"}, "threshold"), ({"threshold": "soon"}, "threshold"),
     ({"stop_training_on_fire": "perhaps"}, "stop_training_on_fire"), ({"clock": "0"}, "clock")],
)
def test_stalled_training_bad_parameters(params: dict[str, Any], needle: str) -> None:
    with pytest.raises(RuleParameterError, match="StalledTrainingRule") as info:
        StalledTrainingRule(TrialKit().trial(), **params)
    assert needle in str(info.value)


def test_stalled_training_accepts_stop_parameters() -> None:
    rule = StalledTrainingRule(
        TrialKit().trial(), stop_training_on_fire="True", training_job_name_prefix="job-"
    )
    assert rule.stop_training_on_fire and rule.training_job_name_prefix == "job-"


def test_engine_reports_a_live_stall_while_idle() -> None:
    """The engine asks ``check_stalled`` on idle polls: a stall needs no new step to be found."""
    from murphy.rules.engine import evaluate_rule

    kit = TrialKit()
    _write(kit, 0, T0)
    clock = Clock(T0 + 1)
    rule = StalledTrainingRule(kit.trial(), threshold="30", clock=clock)
    ticks = 0

    def advance() -> bool:  # should_stop doubles as the clock driver, one poll at a time
        nonlocal ticks
        ticks += 1
        clock.now += 10
        return ticks > 50

    outcome = evaluate_rule(rule, poll_interval=0.001, should_stop=advance)
    assert outcome.status == "IssuesFound"
    assert outcome.message.startswith("no new tensor for") and "after step 0" in outcome.message
    assert ticks < 10
