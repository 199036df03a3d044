"""Issue 18 §1: the STOCK sagemaker SDK (its own venv) works against ``murphy server --auth
sigv4`` with credentials from the environment, and is refused with a wrong secret."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import boto3
import pytest
from compat_harness import clean_env
from test_sagemaker_sdk import ensure_sagemaker_venv

from murphy_server import MakeServer

pytestmark = [pytest.mark.compat, pytest.mark.slow]

SIDE = Path(__file__).resolve().parent / "sagemaker_side"
ACCOUNT = "333333333333"


def test_stock_sagemaker_sdk_signs_with_env_credentials(make_server: MakeServer, tmp_path: Path) -> None:
    python = ensure_sagemaker_venv()
    data = tmp_path / "murphy"
    key = json.loads(subprocess.run(
        [str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python"), "-m", "murphy.cli", "keys",
         "--data-dir", str(data), "create", "--account", ACCOUNT], capture_output=True, text=True, check=True,
        timeout=60).stdout)["AccessKey"]
    server = make_server("--auth", "sigv4", "--runtime", "fake", data_dir=data)
    boto3.client("sagemaker", endpoint_url=server.endpoint, region_name="us-east-1",
                 aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"]
                 ).create_training_job(
        TrainingJobName="sdk-auth", RoleArn=f"arn:aws:iam::{ACCOUNT}:role/r",
        AlgorithmSpecification={"TrainingImage": "murphy/python:latest", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://b/out"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
        StoppingCondition={"MaxRuntimeInSeconds": 60})

    def run(secret: str) -> subprocess.CompletedProcess[str]:
        env = clean_env({"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": secret,
                         "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_SAGEMAKER": server.endpoint,
                         "SAGEMAKER_TELEMETRY_OPT_OUT": "true"})
        return subprocess.run([python, str(SIDE / "auth_check.py"), "sdk-auth"], capture_output=True, text=True,
                              env=env, timeout=300)

    ok = run(key["SecretAccessKey"])
    assert ok.returncode == 0, ok.stderr[-3000:]
    seen = json.loads(ok.stdout.strip().splitlines()[-1])
    assert seen["arn"] == f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-job/sdk-auth"
    assert seen["missing"] == "ValidationException"
    refused = run("x" * 40)
    assert refused.returncode == 0, refused.stderr[-3000:]
    assert json.loads(refused.stdout.strip().splitlines()[-1]) == {"error": "InvalidSignatureException"}
