"""Runs inside .venv-sagemaker (the STOCK sagemaker SDK 2.x): one XGBoost scenario against
`murphy server`.

usage: fit_xgboost.py builtin|script BUCKET DATA_PREFIX SOURCE_DIR RESULT_JSON

``builtin``: ``Estimator(image_uri=image_uris.retrieve("xgboost", region, "1.7-1"))`` with CSV
channels and the loss_not_decreasing, tree_depth and feature_importance_overweight rules;
``script``: ``sagemaker.xgboost.XGBoost(entry_point="train.py", framework_version="1.7-1")``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import sagemaker
from sagemaker import image_uris
from sagemaker.debugger import CollectionConfig, DebuggerHookConfig, Rule, rule_configs
from sagemaker.estimator import Estimator
from sagemaker.inputs import TrainingInput
from sagemaker.session_settings import SessionSettings
from sagemaker.xgboost import XGBoost

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
TERMINAL = {"NoIssuesFound", "IssuesFound", "Error", "Stopped"}


def main() -> None:
    scenario, bucket, prefix, source_dir, result_path = sys.argv[1:6]
    session = sagemaker.Session(default_bucket=bucket, settings=SessionSettings(encrypt_repacked_artifacts=False))
    region = session.boto_region_name
    hook_config = DebuggerHookConfig(collection_configs=[
        CollectionConfig("feature_importance", parameters={"save_interval": "5"}),
        CollectionConfig("trees", parameters={"save_interval": "5"}),
        CollectionConfig("metrics", parameters={"save_interval": "5"}),
    ])
    common: dict[str, Any] = {
        "role": ROLE, "instance_count": 1, "instance_type": "ml.m5.xlarge", "output_path": f"s3://{bucket}/",
        "sagemaker_session": session, "debugger_hook_config": hook_config,
    }
    if scenario == "builtin":
        est: Any = Estimator(
            image_uri=image_uris.retrieve("xgboost", region, "1.7-1"),
            hyperparameters={"num_round": 30, "objective": "binary:logistic", "max_depth": 6, "eta": 0.1,
                             "eval_metric": "logloss"},
            rules=[Rule.sagemaker(rule_configs.loss_not_decreasing()), Rule.sagemaker(rule_configs.tree_depth()),
                   Rule.sagemaker(rule_configs.feature_importance_overweight()),
                   Rule.sagemaker(rule_configs.create_xgboost_report())],
            **common,
        )
    else:
        est = XGBoost(entry_point="train.py", source_dir=source_dir, framework_version="1.7-1",
                      hyperparameters={"num_round": 30, "max_depth": 6},
                      rules=[Rule.sagemaker(rule_configs.feature_importance_overweight())], **common)
    channels = {name: TrainingInput(f"s3://{bucket}/{prefix}/{name}/", content_type="text/csv")
                for name in ("train", "validation")}
    est.fit(channels, wait=True, logs="All")
    job = est.latest_training_job
    deadline = time.monotonic() + 180
    while True:  # the rules judge the last saved steps after the job completed
        described = job.describe()
        statuses = [r["RuleEvaluationStatus"] for r in described.get("DebugRuleEvaluationStatuses", [])]
        if all(s in TERMINAL for s in statuses) or time.monotonic() > deadline:
            break
        time.sleep(2)
    result = {
        "job_name": job.name, "status": described["TrainingJobStatus"], "failure": described.get("FailureReason"),
        "image": described["AlgorithmSpecification"]["TrainingImage"], "hyperparameters": described["HyperParameters"],
        "rules": {r["RuleConfigurationName"]: r["RuleEvaluationStatus"] for r in described["DebugRuleEvaluationStatuses"]},
        "rule_details": {r["RuleConfigurationName"]: r.get("StatusDetails", "") for r in described["DebugRuleEvaluationStatuses"]},
        "collections": sorted(c["CollectionName"] for c in described["DebugHookConfig"]["CollectionConfigurations"]),
        "model_data": est.model_data, "artifacts": est.latest_job_debugger_artifacts_path(),
    }
    with open(result_path, "w") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    main()
