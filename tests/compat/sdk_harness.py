"""What the stock-SDK tests (2.x: test_sagemaker_sdk.py, 3.x: test_sagemaker3_sdk.py) share: one
SDK scenario running in its own process, and the environment a user sets for the SDK."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat_harness import clean_env

import servers
from murphy_server import MurphyServer

FIT_TIMEOUT_S = 400


@dataclass
class Fit:
    """One scenario of sagemaker_side/fit.py, running in its own SDK process."""

    scenario: str
    proc: subprocess.Popen[bytes]
    output_path: Path
    result_path: Path
    started: float  # time.time() at launch

    def wait(self) -> tuple[str, dict[str, Any]]:
        """The SDK process's stdout+stderr and its result file, once it has exited 0."""
        try:
            self.proc.wait(timeout=max(1.0, FIT_TIMEOUT_S - (time.time() - self.started)))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        output = self.output_path.read_text(errors="replace")
        assert self.proc.returncode == 0, f"{self.scenario}: SDK process exited {self.proc.returncode}:\n{output[-6000:]}"
        return output, json.loads(self.result_path.read_text())

    @property
    def seconds(self) -> float | None:
        """Wall time of the whole SDK process (import, fit, describe), once it has finished."""
        if not self.result_path.exists():
            return None
        return round(float(json.loads(self.result_path.read_text())["finished_at"]) - self.started, 1)


def sdk_environment(server: MurphyServer, s3: servers.S3Server, bucket: str, where: Path) -> dict[str, str]:
    """What a user sets (docs/sagemaker-compat.md): endpoints, credentials, a real region name, and
    the SDK's config file with the default bucket and the telemetry opt-out."""
    config = where / "sagemaker-config.yaml"
    config.write_text(
        "SchemaVersion: '1.0'\n"
        "SageMaker:\n"
        "  PythonSDK:\n"
        "    Modules:\n"
        "      TelemetryOptOut: true\n"
        "      Session:\n"
        f"        DefaultS3Bucket: {bucket}\n"
    )
    env = {k: v for k, v in clean_env().items() if not k.startswith("SAGEMAKER_")}
    env.update(
        AWS_ENDPOINT_URL_SAGEMAKER=server.endpoint,
        AWS_ENDPOINT_URL_CLOUDWATCH_LOGS=server.endpoint,
        AWS_ENDPOINT_URL_S3=s3.endpoint_url,
        AWS_ACCESS_KEY_ID=s3.access_key,
        AWS_SECRET_ACCESS_KEY=s3.secret_key,
        AWS_DEFAULT_REGION="us-west-2",
        # No profile or credentials file of the machine may change what the SDK does.
        AWS_CONFIG_FILE=str(where / "no-aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(where / "no-aws-credentials"),
        SAGEMAKER_SUPPRESS_V2_WARNING="1",
        SAGEMAKER_USER_CONFIG_OVERRIDE=str(config),
    )
    return env
