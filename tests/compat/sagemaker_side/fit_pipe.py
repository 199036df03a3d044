"""Runs inside .venv-sagemaker (the STOCK sagemaker SDK 2.x): a Pipe-mode fit.

usage: fit_pipe.py BUCKET SCRIPT RESULT_JSON

``PyTorch(..., input_mode="Pipe")`` with SCRIPT (written for SageMaker's Pipe mode: it opens
``/opt/ml/input/data/train_0`` and ``train_1``) as its entry point, fit on a ``train`` channel
(the estimator's Pipe mode) and a ``files`` channel whose ``TrainingInput(input_mode="File")``
overrides it. The channels' objects are uploaded here through the SDK's session. Endpoints and
credentials come from the environment as for fit.py; the SDK's own output goes to stdout.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile

import sagemaker
from sagemaker.inputs import TrainingInput
from sagemaker.pytorch import PyTorch
from sagemaker.session_settings import SessionSettings

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1.0-cpu-py310"
TRAIN = {"part-0": b"alpha-" * 10, "part-1": bytes(range(256)) * 4000, "sub/part-2": b"omega"}


def main() -> None:
    bucket, script, result_path = sys.argv[1:4]
    session = sagemaker.Session(default_bucket=bucket, settings=SessionSettings(encrypt_repacked_artifacts=False))
    s3 = session.boto_session.client("s3")  # AWS_ENDPOINT_URL_S3 names the store
    for key, data in TRAIN.items():
        s3.put_object(Bucket=bucket, Key=f"pipe/train/{key}", Body=data)
    s3.put_object(Bucket=bucket, Key="pipe/files/f.txt", Body=b"file-mode")
    source = tempfile.mkdtemp(prefix="pipe-source-")
    shutil.copy(script, os.path.join(source, "train.py"))
    est = PyTorch(
        entry_point="train.py", source_dir=source, image_uri=IMAGE, framework_version="2.1", py_version="py310",
        role=ROLE, instance_count=1, instance_type="ml.m5.xlarge", output_path=f"s3://{bucket}/",
        input_mode="Pipe", debugger_hook_config=False, sagemaker_session=session,
    )
    est.fit({"train": TrainingInput(f"s3://{bucket}/pipe/train"),
             "files": TrainingInput(f"s3://{bucket}/pipe/files", input_mode="File")}, wait=True, logs="All")
    described = est.latest_training_job.describe()
    result = {
        "status": described["TrainingJobStatus"],
        "failure": described.get("FailureReason"),
        "input_mode": described["AlgorithmSpecification"]["TrainingInputMode"],
        "channels": {c["ChannelName"]: c.get("InputMode") for c in described["InputDataConfig"]},
        "expected": hashlib.sha256(b"".join(TRAIN[k] for k in sorted(TRAIN))).hexdigest(),
    }
    with open(result_path, "w") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    main()
