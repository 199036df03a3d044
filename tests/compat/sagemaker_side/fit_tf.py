"""Runs inside .venv-sagemaker (the STOCK sagemaker SDK 2.x): the article's TensorFlow estimator,
with today's argument names, against `murphy server` (its Docker runtime).

usage: fit_tf.py BUCKET SOURCE_DIR RESULT_JSON
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import sagemaker
from sagemaker.debugger import Rule, rule_configs
from sagemaker.session_settings import SessionSettings
from sagemaker.tensorflow import TensorFlow

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
bad_hyperparameters = {"steps": 10, "lr": 100, "scale": 100000000000, "debug_frequency": 1}


def main() -> None:
    bucket, source_dir, result_path = sys.argv[1:4]
    session = sagemaker.Session(default_bucket=bucket, settings=SessionSettings(encrypt_repacked_artifacts=False))
    estimator = TensorFlow(
        role=ROLE,
        base_job_name="debugger-simple-demo",
        entry_point="script-v2.py",
        source_dir=source_dir,
        framework_version="2.16",
        py_version="py310",
        instance_count=1,
        instance_type="ml.c5.2xlarge",
        hyperparameters=bad_hyperparameters,
        rules=[Rule.sagemaker(rule_configs.exploding_tensor())],
        output_path=f"s3://{bucket}/",
        sagemaker_session=session,
    )
    start = time.monotonic()
    estimator.fit(wait=True, logs="All")
    job = estimator.latest_training_job
    described = session.sagemaker_client.describe_training_job(TrainingJobName=job.name)
    result: dict[str, Any] = {
        "fit_seconds": round(time.monotonic() - start, 1),
        "job_name": job.name,
        "status": described["TrainingJobStatus"],
        "secondary": described["SecondaryStatus"],
        "image": described["AlgorithmSpecification"]["TrainingImage"],
        "rule": [described["DebugRuleEvaluationStatuses"][0]["RuleConfigurationName"],
                 described["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"]],
        "artifacts": estimator.latest_job_debugger_artifacts_path(),
    }
    with open(result_path, "w") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    main()
