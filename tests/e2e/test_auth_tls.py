"""Issue 18 §4: ``murphy server --tls-cert/--tls-key`` serves HTTPS with SigV4 on; the stock boto3
client verifies the certificate and signs as usual."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import boto3
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from murphy_server import free_port


def self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_https_with_sigv4(tmp_path: Path) -> None:
    cert, key_file = self_signed(tmp_path)
    data = tmp_path / "murphy"
    key = json.loads(subprocess.run([sys.executable, "-m", "murphy.cli", "keys", "--data-dir", str(data), "create",
                                     "--account", "444444444444"], capture_output=True, text=True, check=True,
                                    timeout=60).stdout)["AccessKey"]
    port, log_path = free_port(), tmp_path / "tls.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "murphy.cli", "server", "--port", str(port), "--data-dir",
                             str(data), "--auth", "sigv4", "--runtime", "fake", "--tls-cert", str(cert),
                             "--tls-key", str(key_file)], stdout=log, stderr=subprocess.STDOUT)
    try:
        import ssl

        context = ssl.create_default_context(cafile=str(cert))
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=1, context=context) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.2)
        sm = boto3.client("sagemaker", endpoint_url=f"https://127.0.0.1:{port}", region_name="us-east-1",
                          verify=str(cert), aws_access_key_id=key["AccessKeyId"],
                          aws_secret_access_key=key["SecretAccessKey"])
        assert sm.list_training_jobs()["TrainingJobSummaries"] == []
    finally:
        proc.terminate()
        proc.wait(15)
        log.close()
