"""Issue 18 §4: ``infra/compose/local_ca.sh`` (what ``make up`` runs with MURPHY_UP_TLS=1) makes a
local CA and a server certificate it signs; ``murphy server`` serves HTTPS with it (certificate and
key from MURPHY_TLS_CERT / MURPHY_TLS_KEY, as compose passes them) and the stock boto3 client,
trusting only that CA, verifies it and signs with SigV4."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import SSLError

from murphy_server import free_port

ROOT = Path(__file__).resolve().parents[2]
CA_SCRIPT = ROOT / "infra" / "compose" / "local_ca.sh"


def make_ca(ca_dir: Path, server_dir: Path, *names: str) -> None:
    subprocess.run([str(CA_SCRIPT), str(ca_dir), str(server_dir), *names], check=True, timeout=60,
                   capture_output=True)


def test_the_local_ca_is_made_once_and_the_certificate_renewed_when_its_names_change(tmp_path: Path) -> None:
    ca, srv = tmp_path / "tls", tmp_path / "data" / "tls"
    make_ca(ca, srv)
    assert (ca / "ca.key").stat().st_mode & 0o077 == 0 and (srv / "server.key").stat().st_mode & 0o077 == 0
    first_ca, first_cert = (ca / "ca.pem").read_bytes(), (srv / "server.pem").read_bytes()
    make_ca(ca, srv)
    assert (ca / "ca.pem").read_bytes() == first_ca and (srv / "server.pem").read_bytes() == first_cert
    make_ca(ca, srv, "murphy.internal", "10.0.0.7")
    assert (ca / "ca.pem").read_bytes() == first_ca and (srv / "server.pem").read_bytes() != first_cert
    text = subprocess.run(["openssl", "x509", "-in", str(srv / "server.pem"), "-noout", "-text"], check=True,
                          capture_output=True, text=True).stdout
    for name in ("DNS:localhost", "IP Address:127.0.0.1", "DNS:murphy.internal", "IP Address:10.0.0.7",
                 "TLS Web Server Authentication", "CA:FALSE"):
        assert name in text, text


def test_https_with_the_local_ca(tmp_path: Path) -> None:
    ca, srv = tmp_path / "tls", tmp_path / "murphy" / "tls"
    make_ca(ca, srv)
    data = tmp_path / "murphy"
    key = json.loads(subprocess.run([sys.executable, "-m", "murphy.cli", "keys", "--data-dir", str(data), "create",
                                     "--account", "555555555555"], capture_output=True, text=True, check=True,
                                    timeout=60).stdout)["AccessKey"]
    port, log_path = free_port(), tmp_path / "tls.log"
    env = {**os.environ, "MURPHY_TLS_CERT": str(srv / "server.pem"), "MURPHY_TLS_KEY": str(srv / "server.key")}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "murphy.cli", "server", "--port", str(port), "--data-dir",
                                 str(data), "--auth", "sigv4", "--runtime", "fake"], stdout=log,
                                stderr=subprocess.STDOUT, env=env)
    try:
        context = ssl.create_default_context(cafile=str(ca / "ca.pem"))
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=1, context=context) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.2)
        for host in ("127.0.0.1", "localhost"):
            sm = boto3.client("sagemaker", endpoint_url=f"https://{host}:{port}", region_name="eu-west-1",
                              aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"],
                              verify=str(ca / "ca.pem"))
            assert sm.list_training_jobs()["TrainingJobSummaries"] == []
        untrusting = boto3.client("sagemaker", endpoint_url=f"https://127.0.0.1:{port}", region_name="eu-west-1",
                                  aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
        with pytest.raises(SSLError):
            untrusting.list_training_jobs()
    finally:
        proc.terminate()
        proc.wait(15)
