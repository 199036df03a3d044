"""rule-eval against a real S3 server (SeaweedFS, authenticated): the trial, the custom rule
source and the result all live in S3, the way a SageMaker rule container sees them."""

from __future__ import annotations

import json

import pytest

import servers
from murphy.rules.entrypoint import main
from murphy.storage import S3ObjectStore

from .test_entrypoint import AWS_CUSTOM_RULE, write_job


@pytest.mark.s3
def test_rule_eval_reads_trial_and_source_from_s3_and_writes_result_there(
    seaweedfs_server: servers.S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in seaweedfs_server.env().items():
        monkeypatch.setenv(key, value)
    bucket = servers.new_bucket(seaweedfs_server)
    client = seaweedfs_server.client()
    write_job(S3ObjectStore(bucket, "jobs/job-1/debug-output", client=client))  # type: ignore[arg-type]
    client.put_object(Bucket=bucket, Key="rules/custom_rule.py", Body=AWS_CUSTOM_RULE.encode())
    params = {
        "rule_to_invoke": "CustomGradientRule",
        "source_s3_uri": f"s3://{bucket}/rules/custom_rule.py",
        "threshold": "20",
    }
    code = main(
        [
            "--rule-parameters", json.dumps(params),
            "--base-trial", f"s3://{bucket}/jobs/job-1/debug-output",
            "--result-dir", f"s3://{bucket}/jobs/job-1/rule-output/CustomGradientRule",
        ],
        environ={},
    )
    assert code == 0
    body = client.get_object(Bucket=bucket, Key="jobs/job-1/rule-output/CustomGradientRule/result.json")["Body"]
    result = json.loads(body.read())
    assert (result["status"], result["step"], result["rule_to_invoke"]) == ("IssuesFound", 7, "CustomGradientRule")
    heartbeat = client.get_object(Bucket=bucket, Key="jobs/job-1/rule-output/CustomGradientRule/heartbeat.json")
    assert json.loads(heartbeat["Body"].read())["status"] != "InProgress"
