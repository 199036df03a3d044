"""Run by tests/compat/test_sagemaker_auth.py in the STOCK sagemaker SDK's venv: credentials
come only from the environment (AWS_ACCESS_KEY_ID/...), the endpoint from
AWS_ENDPOINT_URL_SAGEMAKER. Prints one JSON line with what the SDK saw."""

import json
import sys

import sagemaker
from botocore.exceptions import ClientError

session = sagemaker.Session()
try:
    job = session.describe_training_job(sys.argv[1])
except ClientError as e:
    print(json.dumps({"error": e.response["Error"]["Code"]}))
    sys.exit(0)
out = {"status": job["TrainingJobStatus"], "arn": job["TrainingJobArn"]}
try:
    session.describe_training_job("missing-job")
except ClientError as e:
    out["missing"] = e.response["Error"]["Code"]
print(json.dumps(out))
