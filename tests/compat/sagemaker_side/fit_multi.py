"""Runs inside .venv-sagemaker (the STOCK sagemaker SDK 2.x): a 2-host ``torch_distributed`` fit.

usage: fit_multi.py BUCKET SCRIPT RESULT_JSON

``PyTorch(..., instance_count=2, distribution={"torch_distributed": {"enabled": True}})`` with
SCRIPT (a torch.distributed gloo script written for SageMaker) as its entry point, a NaN put in
rank 1's input at step 4, and the SDK's ExplodingTensor rule. Endpoints and credentials come
from the environment as for fit.py; the SDK's own output goes to stdout.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time

import sagemaker
from sagemaker.debugger import CollectionConfig, DebuggerHookConfig, Rule, rule_configs
from sagemaker.pytorch import PyTorch
from sagemaker.session_settings import SessionSettings

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
# The SDK checks torch_distributed against its GPU image table unless an image is named.
IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1.0-cpu-py310"


def main() -> None:
    bucket, script, result_path = sys.argv[1:4]
    source = tempfile.mkdtemp(prefix="multi-source-")
    shutil.copy(script, os.path.join(source, "train.py"))
    est = PyTorch(
        entry_point="train.py", source_dir=source, image_uri=IMAGE, framework_version="2.1", py_version="py310",
        role=ROLE, instance_count=2, instance_type="ml.m5.xlarge", output_path=f"s3://{bucket}/",
        distribution={"torch_distributed": {"enabled": True}},
        hyperparameters={"nan-rank": 1, "nan-step": 4},
        debugger_hook_config=DebuggerHookConfig(
            hook_parameters={"save_interval": "1", "include_workers": "all"},
            collection_configs=[CollectionConfig(name="gradients"), CollectionConfig(name="losses")]),
        rules=[Rule.sagemaker(rule_configs.exploding_tensor())],
        sagemaker_session=sagemaker.Session(default_bucket=bucket,
                                            settings=SessionSettings(encrypt_repacked_artifacts=False)),
    )
    start = time.monotonic()
    est.fit(wait=True, logs="All")
    job = est.latest_training_job
    described = job.describe()
    result = {
        "fit_seconds": round(time.monotonic() - start, 1),
        "job_name": job.name,
        "status": described["TrainingJobStatus"],
        "secondary": described["SecondaryStatus"],
        "hyperparameters": described["HyperParameters"],
        "instance_count": described["ResourceConfig"]["InstanceCount"],
        "rule_summary": job.rule_job_summary(),
        "artifacts": est.latest_job_debugger_artifacts_path(),
    }
    with open(result_path, "w") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    main()
