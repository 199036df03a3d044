"""murphy's diagnosis heuristic on job descriptions and real (synthetic) trials."""

from __future__ import annotations

import numpy as np
from rules.trialkit import TrialKit

from murphy.sdk.diagnosis import diagnose, findings, suspects

DETAILS = ("RuleEvaluationConditionMet: Evaluation of the rule ExplodingTensor at step 2 resulted in the condition "
           "being met. ExplodingTensor: tensor LinearRegression_weight has 2 of 2 non-finite (NaN/inf) values at step 2")


def seed_description(**hyperparameters: str) -> dict[str, object]:
    return {
        "HyperParameters": hyperparameters,
        "DebugRuleEvaluationStatuses": [{"RuleConfigurationName": "ExplodingTensor", "RuleEvaluationStatus": "IssuesFound",
                                         "StatusDetails": DETAILS}],
    }


def test_seed_hyperparameters_are_suspects_and_the_finding_is_parsed() -> None:
    d = diagnose(seed_description(lr="100", scale="100000000000.0", steps="10", debug_frequency="1"))
    assert [(s.hyperparameter, s.value) for s in d.suspects] == [("lr", 100.0), ("scale", 1e11)]
    (f,) = d.findings
    assert (f.rule, f.tensor, f.step) == ("ExplodingTensor", "LinearRegression_weight", 2)
    text = "\n".join(d.lines())
    assert "heuristic" in text
    assert "ExplodingTensor: tensor LinearRegression_weight first went non-finite at step 2" in text
    assert "lr=100:" in text and "scale=1e+11:" in text


def test_sane_and_json_encoded_values() -> None:
    assert suspects({"lr": "0.001", "scale": "1", "learning_rate": '"0.01"', "sagemaker_program": '"train.py"'}) == []
    assert [s.hyperparameter for s in suspects({"learning_rate": "2", "input_scale": "-1e7", "eta": "abc"})] == [
        "learning_rate", "input_scale"]
    assert findings({"DebugRuleEvaluationStatuses": [{"RuleConfigurationName": "X", "RuleEvaluationStatus": "NoIssuesFound"}]}) == []
    assert diagnose({}).lines()[-1].endswith("nothing suspicious: no rule fired and no hyperparameter looks out of range")


def test_first_saved_values_come_from_the_trial() -> None:
    kit = TrialKit()
    kit.step(0, {"LinearRegression_weight": np.full((2, 1), 10.0, np.float32),
                 "gradient/LinearRegression_weight": np.array([[1.28e23], [9.8e22]], np.float32),
                 "MSELoss_output_0": np.float32(1.0e24)})
    kit.step(1, {"gradient/LinearRegression_weight": np.array([[np.nan], [np.nan]], np.float32)})
    d = diagnose(seed_description(lr="0.001"), kit.end().trial())
    assert d.suspects == []
    assert {(v.tensor, v.step) for v in d.first_values} == {("gradient/LinearRegression_weight", 0), ("MSELoss_output_0", 0)}
    text = "\n".join(d.lines())
    assert "first saved gradient/LinearRegression_weight (step 0) is already ~1.3e+23: its square overflows float32" in text
    assert "first saved MSELoss_output_0 (step 0) is already ~1.0e+24\n" in text + "\n"
    assert "no hyperparameter looks out of range" in text


def test_small_first_values_are_not_reported() -> None:
    kit = TrialKit()
    kit.step(0, {"gradient/w": np.array([0.5, -2.0], np.float32), "MSELoss_output_0": np.float32(3.0)})
    assert diagnose({}, kit.end().trial()).first_values == []
