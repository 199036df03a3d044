"""Issue 19 §1, the dashboard under ``--auth sigv4``: Debian's chromium, driven by Playwright,
logs in to a real ``murphy server --auth sigv4`` with a key made by the real ``murphy keys`` CLI.

The driver (login_driver.py, in the browser venv) only observes; the assertions are here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from test_auth import client, keys

DRIVER = Path(__file__).with_name("login_driver.py")
A, B = "111111111111", "222222222222"

pytestmark = pytest.mark.slow


def create_job(sm: Any, name: str, account: str) -> None:
    sm.create_training_job(
        TrainingJobName=name, RoleArn=f"arn:aws:iam::{account}:role/r",
        AlgorithmSpecification={"TrainingImage": "murphy/python:latest", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://b/out"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
        StoppingCondition={"MaxRuntimeInSeconds": 600})


def test_login_scopes_the_dashboard_to_the_keys_account(make_server: Any, tmp_path: Path, browser_python: str,
                                                        artifacts_dir: Path) -> None:
    data = tmp_path / "murphy"
    key_a = keys(data, "create", "--account", A, "--name", "alice")["AccessKey"]
    key_b = keys(data, "create", "--account", B, "--name", "bob")["AccessKey"]
    server = make_server("--auth", "sigv4", "--runtime", "fake", data_dir=data,
                         env={"MURPHY_AUTH_KEY_CACHE_S": "0"})
    a = client(server, key_a["AccessKeyId"], key_a["SecretAccessKey"])
    b = client(server, key_b["AccessKeyId"], key_b["SecretAccessKey"])
    create_job(a, "alices", A)
    create_job(b, "bobs", B)
    proc = subprocess.run([browser_python, str(DRIVER), server.endpoint, str(artifacts_dir),
                           key_a["AccessKeyId"], key_a["SecretAccessKey"]],
                          capture_output=True, text=True, timeout=240,
                          env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "failure" not in facts, (facts, server.log()[-3000:])
    # A page without a session goes to the login form, and comes back after it.
    assert facts["unauthenticated_url"] == f"{server.endpoint}/ui/login?next=%2Fui%2Fjobs%2Falices"
    assert facts["wrong_secret_url"] == f"{server.endpoint}/ui/login"
    assert "not valid" in facts["wrong_secret_error"]
    assert facts["after_login_url"] == f"{server.endpoint}/ui/jobs/alices"
    assert facts["cookie_flags"] == {"murphy_session": [True, "Strict"], "murphy_csrf": [False, "Strict"]}
    # Only the key's account's jobs; the other account's job answers exactly as a missing one.
    assert facts["listed"] == ["alices"]
    assert facts["logout_visible"] is True
    assert facts["dashboard_alices"] == 200
    assert facts["dashboard_bobs"] == facts["dashboard_no-such-job"] and facts["dashboard_bobs"][0] == 404
    # Stop without the CSRF token is refused; the page's Stop button (which sends it) works.
    status, body = facts["stop_without_csrf"]
    assert status == 403 and json.loads(body)["__type"] == "AccessDeniedException"
    assert facts["stop_button_status"] == 200
    assert a.describe_training_job(TrainingJobName="alices")["TrainingJobStatus"] in ("Stopping", "Stopped")
    assert b.describe_training_job(TrainingJobName="bobs")["TrainingJobStatus"] == "InProgress"
    # Logout ends the session: the API answers AWS's error again and pages go to the login.
    status, body = facts["after_logout_api"]
    assert status == 403 and json.loads(body)["__type"] == "MissingAuthenticationTokenException"
    assert facts["after_logout_url"] == f"{server.endpoint}/ui/login?next=%2Fui%2F"
    assert facts["errors"] == [], facts["errors"]
    assert key_a["SecretAccessKey"] not in server.log()
