"""Runs inside .venv-sagemaker (the STOCK sagemaker SDK 2.x): one scenario against `murphy server`.

usage: fit.py SCENARIO BUCKET SOURCE_DIR RESULT_JSON

Endpoints, credentials, region and the SDK config file come from the environment, exactly as a
user would set them (docs/sagemaker-compat.md). The SDK's own output goes to stdout; what the
test asserts on besides it is written to RESULT_JSON.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import sagemaker
from botocore.exceptions import ClientError
from sagemaker.debugger import CollectionConfig, DebuggerHookConfig, Rule, rule_configs
from sagemaker.estimator import Estimator
from sagemaker.pytorch import PyTorch
from sagemaker.session_settings import SessionSettings

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
# (kind, health) -> hyperparameters: the seed's for the demo image, source/train.py's for PyTorch.
HYPERPARAMETERS: dict[tuple[str, str], dict[str, Any]] = {
    ("estimator", "exploding"): {"lr": 100, "scale": 1e11, "steps": 10, "debug_frequency": 1},
    ("estimator", "healthy"): {"lr": 0.001, "scale": 1, "steps": 10, "debug_frequency": 1},
    ("action", "exploding"): {"lr": 100, "scale": 1e11, "steps": 10, "debug_frequency": 1},
    ("pytorch", "exploding"): {"lr": 1000, "steps": 10, "step_seconds": 2},
    ("pytorch", "healthy"): {"lr": 0.01, "steps": 10, "step_seconds": 0.7},
}


def estimator(kind: str, bucket: str, source_dir: str, hyperparameters: dict[str, Any], actions: Any = None) -> Any:
    common: dict[str, Any] = {
        "role": ROLE,
        "instance_count": 1,
        "instance_type": "ml.m5.xlarge",
        "output_path": f"s3://{bucket}/",
        "hyperparameters": hyperparameters,
        "rules": [Rule.sagemaker(rule_configs.exploding_tensor(), actions=actions)],
        # SeaweedFS (like MinIO without a KMS) rejects the SDK's default SSE-KMS upload of the
        # source tarball ("aws:kms" without a key id): turn that encryption off, as the SDK allows.
        "sagemaker_session": sagemaker.Session(
            default_bucket=bucket, settings=SessionSettings(encrypt_repacked_artifacts=False)
        ),
    }
    if kind == "estimator":
        return Estimator(image_uri="murphy/linear-regression-demo:latest", **common)
    # A user script saves what its hook config says: every step, gradients and losses (the
    # default, as in smdebug, is losses every 500 steps, which would see only step 0 here).
    hook_config = DebuggerHookConfig(
        hook_parameters={"save_interval": "1"},
        collection_configs=[CollectionConfig(name="gradients"), CollectionConfig(name="losses")],
    )
    return PyTorch(entry_point="train.py", source_dir=source_dir, framework_version="2.1", py_version="py310",
                   debugger_hook_config=hook_config, **common)


def main() -> None:
    scenario, bucket, source_dir, result_path = sys.argv[1:5]
    result: dict[str, Any] = {"scenario": scenario}
    if scenario == "bad-name":
        est = estimator("estimator", bucket, source_dir, HYPERPARAMETERS["estimator", "healthy"])
        try:
            est.fit(job_name="bad_name", wait=False)
        except ClientError as e:
            result["error"] = {"type": type(e).__name__, "code": e.response["Error"]["Code"],
                               "message": e.response["Error"]["Message"],
                               "http": e.response["ResponseMetadata"]["HTTPStatusCode"]}
        client = est.sagemaker_session.sagemaker_client
        try:
            client.describe_training_job(TrainingJobName="no-such-job")
        except ClientError as e:
            result["describe_unknown"] = {"code": e.response["Error"]["Code"], "message": e.response["Error"]["Message"]}
    else:
        kind, health = scenario.split("-")
        # "action": the seed job whose rule has the SDK's actions (sent as RuleParameters.action_json).
        actions = rule_configs.ActionList(rule_configs.StopTraining(), rule_configs.Email("ops@example.com"))
        est = estimator("estimator" if kind == "action" else kind, bucket, source_dir, HYPERPARAMETERS[kind, health],
                        actions if kind == "action" else None)
        start = time.monotonic()
        est.fit(wait=True, logs="All")
        result["fit_seconds"] = round(time.monotonic() - start, 1)
        job = est.latest_training_job
        described = job.describe()
        result.update(
            job_name=job.name,
            status=described["TrainingJobStatus"],
            secondary=described["SecondaryStatus"],
            hyperparameters=described["HyperParameters"],
            image=described["AlgorithmSpecification"]["TrainingImage"],
            rule_parameters=described["DebugRuleConfigurations"][0]["RuleParameters"],
            rule_summary=job.rule_job_summary(),
            artifacts=est.latest_job_debugger_artifacts_path(),
            # Seconds from creation to the terminal status (the SDK first looks after 5 s).
            job_seconds=(described["SecondaryStatusTransitions"][-1]["StartTime"] - described["CreationTime"]).total_seconds(),
        )
        # A later notebook session picks the job up by name (DescribeTrainingJob + ListTags).
        attached = type(est).attach(job.name, sagemaker_session=est.sagemaker_session)
        result["attached"] = {"job_name": attached.latest_training_job.name, "model_data": attached.model_data,
                              "role": attached.role, "image_uri": attached.training_image_uri()}
    result["finished_at"] = time.time()
    with open(result_path, "w") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    main()
