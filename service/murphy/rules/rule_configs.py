"""The ``rule_configs`` catalog: smdebug-rulesconfig's functions and structures.

``rule_configs.vanishing_gradient()`` returns what the SageMaker SDK's ``Rule.sagemaker`` takes::

    {"DebugRuleConfiguration": {"RuleConfigurationName": "VanishingGradient",
                                "RuleParameters": {"rule_to_invoke": "VanishingGradient"}},
     "CollectionConfigurations": [{"CollectionName": "gradients",
                                   "CollectionParameters": {"save_interval": "500"}}]}

``CollectionConfigurations`` lists the collections the rule needs saved; rules that need none
have no such key (as in smdebug-rulesconfig 1.0.1). Every call returns a fresh copy.
"""

from __future__ import annotations

import copy
from typing import Any

_EVERY_500 = {"save_interval": "500"}


def _coll(name: str, **params: str) -> dict[str, Any]:
    return {"CollectionName": name, "CollectionParameters": {**params}}


# rule name -> collections it asks the training job to save
_COLLECTIONS: dict[str, list[dict[str, Any]]] = {
    "VanishingGradient": [_coll("gradients", **_EVERY_500)],
    "SimilarAcrossRuns": [],
    "WeightUpdateRatio": [_coll("weights", **_EVERY_500)],
    "AllZero": [],
    "ExplodingTensor": [],
    "UnchangedTensor": [],
    "LossNotDecreasing": [_coll("losses", **_EVERY_500)],
    "CheckInputImages": [_coll("input_image", include_regex=".*hybridsequential0_input_0", **_EVERY_500)],
    "DeadRelu": [_coll("relu_output", include_regex=".*relu_output", **_EVERY_500)],
    "Confusion": [],
    "TreeDepth": [],
    "ClassImbalance": [],
    "Overfit": [],
    "TensorVariance": [],
    "Overtraining": [],
    "PoorWeightInitialization": [_coll("relu_input", include_regex=".*relu_input", **_EVERY_500)],
    "SaturatedActivation": [],
    "NLPSequenceRatio": [_coll("input_sequence", include_regex=".*embedding0_input_0", **_EVERY_500)],
    "StalledTrainingRule": [],
    "FeatureImportanceOverweight": [_coll("feature_importance", **_EVERY_500)],
    "CreateXgboostReport": [
        _coll("metrics", save_interval="5"),
        _coll("feature_importance", save_interval="5"),
        _coll("hyperparameters", save_steps="0"),
        _coll("predictions", save_interval="5"),
        _coll("labels", save_interval="5"),
    ],
}

RULE_NAMES: tuple[str, ...] = tuple(_COLLECTIONS)

# smdebug-rulesconfig's framework groups (``get_rule_groups``).
RULE_GROUPS: dict[str, dict[str, list[str]]] = {
    "MXNET": {"SIMPLE": ["VanishingGradient", "LossNotDecreasing", "WeightUpdateRatio"], "ALL": []},
    "TENSORFLOW": {"SIMPLE": ["VanishingGradient", "LossNotDecreasing", "WeightUpdateRatio"], "ALL": []},
    "PYTORCH": {"SIMPLE": ["VanishingGradient", "LossNotDecreasing", "WeightUpdateRatio"], "ALL": []},
    "XGBOOST": {"SIMPLE": ["TreeDepth", "ClassImbalance", "CreateXgboostReport"], "ALL": []},
}

# AWS's documented grouping by use (which rules make sense for which kind of model).
UNIVERSAL_RULES = ("AllZero", "ClassImbalance", "Confusion", "LossNotDecreasing", "Overfit",
                   "Overtraining", "SimilarAcrossRuns", "StalledTrainingRule", "UnchangedTensor")
DEEP_LEARNING_RULES = ("DeadRelu", "ExplodingTensor", "PoorWeightInitialization",
                       "SaturatedActivation", "TensorVariance", "VanishingGradient", "WeightUpdateRatio")
DEEP_LEARNING_APPLICATION_RULES = ("CheckInputImages", "NLPSequenceRatio")
XGBOOST_RULES = ("FeatureImportanceOverweight", "TreeDepth", "CreateXgboostReport")


def get_rule_config(rule_name: str) -> dict[str, Any]:
    """The config of one built-in rule by class name; ``KeyError`` naming the known ones."""
    if rule_name not in _COLLECTIONS:
        raise KeyError(f"unknown built-in rule {rule_name!r}; known: {', '.join(RULE_NAMES)}")
    config: dict[str, Any] = {
        "DebugRuleConfiguration": {
            "RuleConfigurationName": rule_name,
            "RuleParameters": {"rule_to_invoke": rule_name},
        }
    }
    if _COLLECTIONS[rule_name]:
        config["CollectionConfigurations"] = copy.deepcopy(_COLLECTIONS[rule_name])
    return config


def get_rule_groups(framework: str, kind: str = "SIMPLE") -> list[dict[str, Any]]:
    """Configs of a framework's rule group (``"PYTORCH"``, ``"SIMPLE"``); [] if unknown."""
    names = RULE_GROUPS.get(framework.upper(), {}).get(kind.upper(), [])
    return [get_rule_config(n) for n in names]


def vanishing_gradient() -> dict[str, Any]:
    """VanishingGradient (saves ``gradients`` every 500 steps)."""
    return get_rule_config("VanishingGradient")


def similar_across_runs() -> dict[str, Any]:
    """SimilarAcrossRuns."""
    return get_rule_config("SimilarAcrossRuns")


def weight_update_ratio() -> dict[str, Any]:
    """WeightUpdateRatio (saves ``weights`` every 500 steps)."""
    return get_rule_config("WeightUpdateRatio")


def all_zero() -> dict[str, Any]:
    """AllZero."""
    return get_rule_config("AllZero")


def exploding_tensor() -> dict[str, Any]:
    """ExplodingTensor."""
    return get_rule_config("ExplodingTensor")


def unchanged_tensor() -> dict[str, Any]:
    """UnchangedTensor."""
    return get_rule_config("UnchangedTensor")


def loss_not_decreasing() -> dict[str, Any]:
    """LossNotDecreasing (saves ``losses`` every 500 steps)."""
    return get_rule_config("LossNotDecreasing")


def check_input_images() -> dict[str, Any]:
    """CheckInputImages (saves ``input_image``: ``.*hybridsequential0_input_0``)."""
    return get_rule_config("CheckInputImages")


def dead_relu() -> dict[str, Any]:
    """DeadRelu (saves ``relu_output``: ``.*relu_output``)."""
    return get_rule_config("DeadRelu")


def confusion() -> dict[str, Any]:
    """Confusion."""
    return get_rule_config("Confusion")


def tree_depth() -> dict[str, Any]:
    """TreeDepth."""
    return get_rule_config("TreeDepth")


def class_imbalance() -> dict[str, Any]:
    """ClassImbalance."""
    return get_rule_config("ClassImbalance")


def overfit() -> dict[str, Any]:
    """Overfit."""
    return get_rule_config("Overfit")


def tensor_variance() -> dict[str, Any]:
    """TensorVariance."""
    return get_rule_config("TensorVariance")


def overtraining() -> dict[str, Any]:
    """Overtraining."""
    return get_rule_config("Overtraining")


def poor_weight_initialization() -> dict[str, Any]:
    """PoorWeightInitialization (saves ``relu_input``: ``.*relu_input``)."""
    return get_rule_config("PoorWeightInitialization")


def saturated_activation() -> dict[str, Any]:
    """SaturatedActivation."""
    return get_rule_config("SaturatedActivation")


def nlp_sequence_ratio() -> dict[str, Any]:
    """NLPSequenceRatio (saves ``input_sequence``: ``.*embedding0_input_0``)."""
    return get_rule_config("NLPSequenceRatio")


def stalled_training_rule() -> dict[str, Any]:
    """StalledTrainingRule."""
    return get_rule_config("StalledTrainingRule")


def feature_importance_overweight() -> dict[str, Any]:
    """FeatureImportanceOverweight (saves ``feature_importance`` every 500 steps)."""
    return get_rule_config("FeatureImportanceOverweight")


def create_xgboost_report() -> dict[str, Any]:
    """CreateXgboostReport (saves metrics, feature_importance, predictions, labels every 5
    steps and hyperparameters at step 0)."""
    return get_rule_config("CreateXgboostReport")
