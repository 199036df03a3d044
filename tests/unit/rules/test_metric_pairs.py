"""XGBoost metric names as train/validation pairs (Overfit and Overtraining on GLOBAL runs)."""

from __future__ import annotations

import numpy as np

from murphy.rules.builtin._metric_pairs import first_value, split_metric, validation_pairs


def test_split_metric() -> None:
    assert split_metric("validation-logloss") == ("validation", "logloss")
    assert split_metric("validation_0-error@0.7") == ("validation_0", "error@0.7")
    assert split_metric("CrossEntropyLoss_output_0") is None
    assert split_metric("feature_importance/weight/f-1") is None


def test_pairs_prefer_validation_and_need_a_train_side() -> None:
    names = ["train-logloss", "test-logloss", "validation-logloss", "train-auc", "eval-auc", "test-rmse"]
    assert validation_pairs(names) == [("train-auc", "eval-auc"), ("train-logloss", "validation-logloss")]
    assert validation_pairs(["validation_0-logloss", "train-logloss"]) == [("train-logloss", "validation_0-logloss")]
    assert validation_pairs(["validation-logloss"]) == []


def test_first_value_reads_cv_mean() -> None:
    assert first_value(np.array([0.25, 0.01])) == 0.25
    assert first_value(np.array([3.0])) == 3.0
