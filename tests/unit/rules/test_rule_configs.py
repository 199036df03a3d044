"""The rule_configs catalog matches smdebug-rulesconfig 1.0.1's structures."""

from __future__ import annotations

import importlib

import pytest

from murphy.rules import rule_configs

FUNCTIONS = {
    "all_zero": "AllZero", "check_input_images": "CheckInputImages",
    "class_imbalance": "ClassImbalance", "confusion": "Confusion",
    "create_xgboost_report": "CreateXgboostReport", "dead_relu": "DeadRelu",
    "exploding_tensor": "ExplodingTensor",
    "feature_importance_overweight": "FeatureImportanceOverweight",
    "loss_not_decreasing": "LossNotDecreasing", "nlp_sequence_ratio": "NLPSequenceRatio",
    "overfit": "Overfit", "overtraining": "Overtraining",
    "poor_weight_initialization": "PoorWeightInitialization",
    "saturated_activation": "SaturatedActivation", "similar_across_runs": "SimilarAcrossRuns",
    "stalled_training_rule": "StalledTrainingRule", "tensor_variance": "TensorVariance",
    "tree_depth": "TreeDepth", "unchanged_tensor": "UnchangedTensor",
    "vanishing_gradient": "VanishingGradient", "weight_update_ratio": "WeightUpdateRatio",
}

# Collections from smdebug-rulesconfig 1.0.1's ruleConfigs.json (rules not listed: none).
EXPECTED_COLLECTIONS = {
    "VanishingGradient": [("gradients", {"save_interval": "500"})],
    "WeightUpdateRatio": [("weights", {"save_interval": "500"})],
    "LossNotDecreasing": [("losses", {"save_interval": "500"})],
    "CheckInputImages": [("input_image", {"include_regex": ".*hybridsequential0_input_0", "save_interval": "500"})],
    "DeadRelu": [("relu_output", {"include_regex": ".*relu_output", "save_interval": "500"})],
    "PoorWeightInitialization": [("relu_input", {"include_regex": ".*relu_input", "save_interval": "500"})],
    "NLPSequenceRatio": [("input_sequence", {"include_regex": ".*embedding0_input_0", "save_interval": "500"})],
    "FeatureImportanceOverweight": [("feature_importance", {"save_interval": "500"})],
    "CreateXgboostReport": [
        ("metrics", {"save_interval": "5"}), ("feature_importance", {"save_interval": "5"}),
        ("hyperparameters", {"save_steps": "0"}), ("predictions", {"save_interval": "5"}),
        ("labels", {"save_interval": "5"}),
    ],
}


@pytest.mark.parametrize("func, rule", sorted(FUNCTIONS.items()))
def test_each_function_returns_the_rulesconfig_structure(func: str, rule: str) -> None:
    config = getattr(rule_configs, func)()
    assert config["DebugRuleConfiguration"] == {
        "RuleConfigurationName": rule, "RuleParameters": {"rule_to_invoke": rule},
    }
    expected = EXPECTED_COLLECTIONS.get(rule)
    if expected is None:
        assert set(config) == {"DebugRuleConfiguration"}
    else:
        assert config["CollectionConfigurations"] == [
            {"CollectionName": n, "CollectionParameters": p} for n, p in expected
        ]


def test_catalog_covers_every_rule_and_returns_copies() -> None:
    assert set(rule_configs.RULE_NAMES) == set(FUNCTIONS.values())
    a = rule_configs.vanishing_gradient()
    a["CollectionConfigurations"][0]["CollectionParameters"]["save_interval"] = "1"
    a["DebugRuleConfiguration"]["RuleParameters"]["threshold"] = "1"
    assert rule_configs.vanishing_gradient() == rule_configs.get_rule_config("VanishingGradient")
    assert rule_configs.vanishing_gradient()["CollectionConfigurations"][0]["CollectionParameters"] == {
        "save_interval": "500"
    }
    with pytest.raises(KeyError, match="NoSuchRule"):
        rule_configs.get_rule_config("NoSuchRule")


def test_rule_groups() -> None:
    names = [c["DebugRuleConfiguration"]["RuleConfigurationName"] for c in rule_configs.get_rule_groups("pytorch")]
    assert names == ["VanishingGradient", "LossNotDecreasing", "WeightUpdateRatio"]
    assert rule_configs.get_rule_groups("PYTORCH", "ALL") == []
    assert rule_configs.get_rule_groups("jax") == []
    groups = (rule_configs.UNIVERSAL_RULES + rule_configs.DEEP_LEARNING_RULES
              + rule_configs.DEEP_LEARNING_APPLICATION_RULES + rule_configs.XGBOOST_RULES)
    assert sorted(groups) == sorted(rule_configs.RULE_NAMES)


GROUP_A = {
    "ExplodingTensor": "exploding_tensor", "VanishingGradient": "vanishing_gradient",
    "LossNotDecreasing": "loss_not_decreasing", "Overfit": "overfit", "Overtraining": "overtraining",
    "AllZero": "all_zero", "WeightUpdateRatio": "weight_update_ratio",
    "PoorWeightInitialization": "poor_weight_initialization",
    "SaturatedActivation": "saturated_activation", "DeadRelu": "dead_relu",
}


@pytest.mark.parametrize("rule, module", sorted(GROUP_A.items()))
def test_catalog_names_match_rule_classes(rule: str, module: str) -> None:
    mod = importlib.import_module(f"murphy.rules.builtin.{module}")
    assert getattr(mod, rule).__name__ == rule
