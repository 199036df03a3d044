"""Runs inside .venv-sagemaker3 (the STOCK sagemaker SDK 3.x): one scenario against `murphy server`.

usage: run.py SCENARIO BUCKET SOURCE_DIR RESULT_JSON

Endpoints, credentials, region and the SDK config file come from the environment, exactly as a
user would set them (docs/sagemaker-compat.md, section 9). The SDK's own output goes to stdout;
what the test asserts on besides it is written to RESULT_JSON.

Scenarios: ``create-exploding`` / ``create-healthy`` (the seed demo through
``TrainingJob.create`` with an ExplodingTensor rule on AWS's rule image), ``script`` (v3 script
mode: ``ModelTrainer`` + ``SourceCode``, no rule), ``script-rule`` (the same request as
``ModelTrainer`` builds it, sent through ``TrainingJob.create`` with a rule whose image is the
``DEFAULT_RULE_EVALUATOR_IMAGE`` placeholder ``Rule.sagemaker()`` leaves).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

from sagemaker.core import shapes
from sagemaker.core.debugger import Rule, get_rule_container_image_uri, rule_configs
from sagemaker.core.helper.session_helper import Session
from sagemaker.core.resources import TrainingJob
from sagemaker.train import ModelTrainer
from sagemaker.train.configs import Compute, SourceCode

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
PYTORCH_IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
DEMO_IMAGE = "murphy/linear-regression-demo:latest"
HYPERPARAMETERS: dict[str, dict[str, Any]] = {
    "create-exploding": {"lr": "100", "scale": "100000000000.0", "steps": "10", "debug_frequency": "1"},
    "create-healthy": {"lr": "0.001", "scale": "1", "steps": "10", "debug_frequency": "1"},
    "script": {"lr": 0.01, "steps": 6},
    "script-rule": {"lr": 1000, "steps": 10, "step_seconds": 2},
}


def rule_config(bucket: str, region: str, resolve_image: bool) -> shapes.DebugRuleConfiguration:
    """``Rule.sagemaker(rule_configs.exploding_tensor())`` as a CreateTrainingJob rule: with AWS's
    regional rule image (as 2.x resolved it), or with the placeholder v3 leaves."""
    rule = Rule.sagemaker(rule_configs.exploding_tensor())
    image = get_rule_container_image_uri(rule.name, region) if resolve_image else rule.image_uri
    return shapes.DebugRuleConfiguration(rule_configuration_name=rule.name, rule_evaluator_image=image,
                                         rule_parameters=rule.rule_parameters)


def hook_config(bucket: str) -> shapes.DebugHookConfig:
    # Every step, gradients and losses (smdebug's default saves losses every 500 steps).
    return shapes.DebugHookConfig(
        s3_output_path=f"s3://{bucket}/", hook_parameters={"save_interval": "1"},
        collection_configurations=[shapes.CollectionConfiguration(collection_name="gradients"),
                                   shapes.CollectionConfiguration(collection_name="losses")])


def trainer(scenario: str, bucket: str, source_dir: str) -> ModelTrainer:
    return ModelTrainer(
        training_image=PYTORCH_IMAGE,
        source_code=SourceCode(source_dir=source_dir, entry_script="train.py"),
        compute=Compute(instance_type="ml.m5.xlarge", instance_count=1),
        role=ROLE,
        base_job_name=f"v3-{scenario}",
        hyperparameters=HYPERPARAMETERS[scenario],
        output_data_config=shapes.OutputDataConfig(s3_output_path=f"s3://{bucket}/"),
        sagemaker_session=Session(default_bucket=bucket),
    )


def create(scenario: str, bucket: str, region: str) -> TrainingJob:
    name = f"v3-{scenario}-{int(time.time() * 1000)}"
    job = TrainingJob.create(
        training_job_name=name,
        role_arn=ROLE,
        algorithm_specification=shapes.AlgorithmSpecification(training_image=DEMO_IMAGE, training_input_mode="File"),
        hyper_parameters=HYPERPARAMETERS[scenario],
        output_data_config=shapes.OutputDataConfig(s3_output_path=f"s3://{bucket}/"),
        resource_config=shapes.ResourceConfig(instance_type="ml.m5.xlarge", instance_count=1, volume_size_in_gb=30),
        stopping_condition=shapes.StoppingCondition(max_runtime_in_seconds=600),
        debug_hook_config=shapes.DebugHookConfig(s3_output_path=f"s3://{bucket}/", collection_configurations=[]),
        debug_rule_configurations=[rule_config(bucket, region, resolve_image=True)],
    )
    assert job is not None
    return job


def wait(job: TrainingJob, result: dict[str, Any]) -> None:
    """``wait(logs=True)`` as a notebook calls it (it returns at Stopped, raises at Failed)."""
    try:
        job.wait(logs=True)
    except Exception as e:  # the SDK's FailedStatusError
        result["wait_error"] = f"{type(e).__name__}: {e}"


def describe(job: TrainingJob) -> dict[str, Any]:
    job.refresh()
    algorithm = job.algorithm_specification
    statuses = job.debug_rule_evaluation_statuses
    transitions = job.secondary_status_transitions
    return {
        "job_name": job.training_job_name,
        "status": job.training_job_status,
        "secondary": job.secondary_status,
        "failure_reason": getattr(job, "failure_reason", None),
        "image": algorithm.training_image,
        "entrypoint": list(algorithm.container_entrypoint) if _given(algorithm.container_entrypoint) else None,
        "arguments": list(algorithm.container_arguments) if _given(algorithm.container_arguments) else None,
        "channels": sorted(c.channel_name for c in job.input_data_config) if _given(job.input_data_config) else [],
        "channel_uris": {c.channel_name: c.data_source.s3_data_source.s3_uri for c in job.input_data_config}
        if _given(job.input_data_config) else {},
        "hyperparameters": dict(job.hyper_parameters) if _given(job.hyper_parameters) else {},
        "rules": [{"name": s.rule_configuration_name, "status": s.rule_evaluation_status,
                   "details": s.status_details if _given(s.status_details) else ""}
                  for s in statuses] if _given(statuses) else [],
        "rule_images": [r.rule_evaluator_image for r in job.debug_rule_configurations]
        if _given(job.debug_rule_configurations) else [],
        "model_artifacts": job.model_artifacts.s3_model_artifacts if _given(job.model_artifacts) else None,
        "job_seconds": (transitions[-1].start_time - job.creation_time).total_seconds(),
    }


def _given(value: Any) -> bool:
    return value is not None and type(value).__name__ != "Unassigned"


def main() -> None:
    # 3.x leaves logging to the application: without this, wait(logs=True) prints nothing.
    logging.basicConfig(level=logging.INFO)
    scenario, bucket, source_dir, result_path = sys.argv[1:5]
    region = os.environ["AWS_DEFAULT_REGION"]
    result: dict[str, Any] = {"scenario": scenario}
    start = time.monotonic()
    if scenario.startswith("create-"):
        job = create(scenario, bucket, region)
        wait(job, result)
    elif scenario == "script":
        model_trainer = trainer(scenario, bucket, source_dir)
        try:
            model_trainer.train(wait=True, logs=True)
        except Exception as e:
            result["wait_error"] = f"{type(e).__name__}: {e}"
        job = model_trainer._latest_training_job
    else:
        # ModelTrainer has no rules: send exactly the request it builds (code and sm_drivers
        # uploaded, the bash entrypoint), with the Debugger fields added.
        request = trainer(scenario, bucket, source_dir)._create_training_job_args()
        job = TrainingJob.create(**request, debug_hook_config=hook_config(bucket),
                                 debug_rule_configurations=[rule_config(bucket, region, resolve_image=False)])
        wait(job, result)
    result["wait_seconds"] = round(time.monotonic() - start, 1)
    result.update(describe(job))
    result["finished_at"] = time.time()
    with open(result_path, "w") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    main()
