"""Run the GPU check through murphy's SDK against a `murphy server --runtime docker` on an NVIDIA
host (docs/gpu.md): a PyTorch job on a GPU instance type with ExplodingTensor and
VanishingGradient, then the saved gradients read back with a trial.

usage: python training_images/examples/gpu_smoke/run.py --endpoint http://127.0.0.1:8080
           [--instance-type ml.g5.xlarge] [--bucket murphy]
Exit code 0 only when the job Completed on the GPU with both rules NoIssuesFound.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from murphy.sdk import PyTorch, Rule, rule_configs
from murphy.trial import create_trial


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--instance-type", default="ml.g5.xlarge")
    ap.add_argument("--bucket", default="murphy")
    args = ap.parse_args()
    estimator = PyTorch(
        entry_point="train.py", source_dir=str(Path(__file__).parent), framework_version="2.1", py_version="py310",
        instance_type=args.instance_type, role="arn:aws:iam::123456789012:role/murphy", endpoint=args.endpoint,
        output_path=f"s3://{args.bucket}/gpu-smoke", hyperparameters={"steps": 200},
        rules=[Rule.sagemaker(rule_configs.exploding_tensor()), Rule.sagemaker(rule_configs.vanishing_gradient())],
    )
    try:
        estimator.fit(wait=True, logs=True)
    except Exception as e:  # the SDK raises for a Failed job, as SageMaker's does
        print(f"\n{type(e).__name__}: {e}")
    job = estimator.latest_training_job.describe()
    statuses = {r["RuleConfigurationName"]: r["RuleEvaluationStatus"] for r in job["DebugRuleEvaluationStatuses"]}
    print(f"\n{job['TrainingJobName']}: {job['TrainingJobStatus']} on {args.instance_type}; rules {statuses}")
    if job["TrainingJobStatus"] != "Completed":
        print(f"FailureReason: {job.get('FailureReason')}")
        return 1
    trial = create_trial(estimator.latest_job_debugger_artifacts_path())
    grads = trial.tensor_names(collection="gradients")
    print(f"{len(grads)} gradient tensors over steps {trial.steps()[:3]}...{trial.steps()[-1:]}")
    return 0 if set(statuses.values()) == {"NoIssuesFound"} and grads else 1


if __name__ == "__main__":
    sys.exit(main())
