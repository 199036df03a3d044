"""Issue 18 §4: ``MURPHY_UP_TLS=1 make up`` (processes mode) makes a local CA, murphy serves HTTPS
with a certificate it signed, and ``client.env`` alone (its AWS_CA_BUNDLE, its https endpoint)
is enough for the stock boto3 client; a second ``make up`` finds it up, ``make down`` stops it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from test_make_up import Deployment, _needs, _ports, _postgres_installed

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CHECK = """
import boto3
sm = boto3.client("sagemaker")
print("jobs", len(sm.list_training_jobs()["TrainingJobSummaries"]))
print("endpoint", sm.meta.endpoint_url)
"""


def test_make_up_with_tls_serves_https_that_client_env_trusts(docker_engine: Any) -> None:
    _needs(_postgres_installed(), "no PostgreSQL server binaries (apt-get install postgresql)")
    state = Path(tempfile.mkdtemp(prefix="murphy-up-tls-"))
    state.chmod(0o755)
    env = {**os.environ, **_ports(), "MURPHY_UP_MODE": "processes", "MURPHY_UP_DIR": str(state), "MURPHY_UP_TLS": "1"}
    for key in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "MURPHY_S3_ENDPOINT_URL", "MURPHY_ENDPOINT", "AWS_CA_BUNDLE"):
        env.pop(key, None)
    dep = Deployment("processes", state, env)
    try:
        up = dep.make("up")
        assert up.returncode == 0, up.stdout + up.stderr
        dep.load()
        api = f"https://127.0.0.1:{dep.settings['MURPHY_UP_PORT']}"
        assert api in up.stdout, up.stdout
        client_env = dict(line.split("=", 1) for line in (state / "client.env").read_text().splitlines()
                          if "=" in line and not line.startswith("#"))
        assert client_env["AWS_ENDPOINT_URL_SAGEMAKER"] == api
        assert client_env["AWS_CA_BUNDLE"] == str(state / "tls" / "ca.pem")
        assert (state / "tls" / "ca.key").stat().st_mode & 0o077 == 0
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MURPHY_"))}
        run = subprocess.run([sys.executable, "-c", CHECK], env={**clean, **client_env}, capture_output=True,
                             text=True, timeout=60)
        assert run.returncode == 0 and "jobs 0" in run.stdout and f"endpoint {api}" in run.stdout, run.stdout + run.stderr
        # Without the CA the certificate is not trusted.
        untrusted = {k: v for k, v in client_env.items() if k != "AWS_CA_BUNDLE"}
        bad = subprocess.run([sys.executable, "-c", CHECK], env={**clean, **untrusted}, capture_output=True,
                             text=True, timeout=60)
        assert bad.returncode != 0 and "SSL" in bad.stderr, bad.stdout + bad.stderr
        again = dep.make("up", timeout=120)
        assert again.returncode == 0 and "already up" in again.stdout, again.stdout + again.stderr
        down = dep.make("down", timeout=180)
        assert down.returncode == 0, down.stdout + down.stderr
    finally:
        if state.exists():
            dep.make("down", "PURGE=1", timeout=180)
        shutil.rmtree(state, ignore_errors=True)
