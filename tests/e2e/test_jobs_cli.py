"""``murphy jobs list | describe | stop | logs`` as real processes against a real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from test_control_plane import EXPLODING, HEALTHY, SLOW_SCRIPT, job_request, watch

from sourcetar import train_py_tarball


def murphy(server: Any, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MURPHY_ENDPOINT": server.endpoint, "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-west-2", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "murphy.cli", *args], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.slow
def test_jobs_cli_lists_describes_and_prints_logs(make_server: Any) -> None:
    server = make_server()
    client = server.client()
    client.create_training_job(**job_request("cli-bad", "murphy-e2e", EXPLODING))
    client.create_training_job(**job_request("cli-good", "murphy-e2e", HEALTHY))
    watch(client, "cli-bad")
    watch(client, "cli-good")

    listed = murphy(server, "jobs", "list")
    assert listed.returncode == 0, listed.stderr
    assert "cli-bad" in listed.stdout and "cli-good" in listed.stdout
    assert "Stopped" in listed.stdout and "Completed" in listed.stdout

    described = murphy(server, "jobs", "describe", "cli-bad")
    assert described.returncode == 0, described.stderr
    assert "ExplodingTensor" in described.stdout and "IssuesFound" in described.stdout
    assert "s3://murphy-e2e/debug/cli-bad/debug-output" in described.stdout

    as_json = json.loads(murphy(server, "jobs", "describe", "cli-good", "--json").stdout)
    assert as_json["TrainingJobStatus"] == "Completed"

    logs = murphy(server, "jobs", "logs", "cli-good")
    assert logs.returncode == 0, logs.stderr
    assert [ln for ln in logs.stdout.splitlines() if ln.startswith("Step=")][-1].startswith("Step=9")

    missing = murphy(server, "jobs", "describe", "no-such-job")
    assert missing.returncode != 0
    assert "Requested resource not found." in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.mark.slow
def test_jobs_cli_stop_and_follow(make_server: Any) -> None:
    server = make_server()
    buckets = server.data_dir / "buckets"
    (buckets / "src").mkdir(parents=True, exist_ok=True)
    (buckets / "src" / "sourcedir.tar.gz").write_bytes(train_py_tarball(SLOW_SCRIPT))
    request = job_request("cli-slow", "murphy-e2e", {
        "ticks": "300", "sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://src/sourcedir.tar.gz"'})
    request["AlgorithmSpecification"]["TrainingImage"] = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
    request.pop("DebugHookConfig")
    request.pop("DebugRuleConfigurations")
    server.client().create_training_job(**request)
    env = {**os.environ, "MURPHY_ENDPOINT": server.endpoint, "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-west-2"}
    follower = subprocess.Popen([sys.executable, "-m", "murphy.cli", "jobs", "logs", "cli-slow", "--follow"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        time.sleep(3)
        stopped = murphy(server, "jobs", "stop", "cli-slow", "--wait")
        assert stopped.returncode == 0, stopped.stderr
        assert "cli-slow: Stopped / Stopped" in stopped.stdout
        out, err = follower.communicate(timeout=30)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    assert "tick 0" in out and "tick 299" not in out  # followed while running, ended with the job
    again = murphy(server, "jobs", "stop", "cli-slow")
    assert again.returncode != 0 and "is in status Stopped" in again.stderr
