"""The STOCK sagemaker SDK 2.x runs a Pipe-mode job against a real ``murphy server`` (process and
Docker runtimes, data on SeaweedFS): ``PyTorch(..., input_mode="Pipe")`` fit on a Pipe channel and
a File channel (``TrainingInput(input_mode="File")``); the unchanged script reads two epochs from
``/opt/ml/input/data/train_0`` / ``train_1``. The SDK venv is the one test_sagemaker_sdk.py builds
(infra/ci/sagemaker_venv.sh)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sdk_harness import sdk_environment
from test_sagemaker_sdk import ensure_sagemaker_venv

import servers

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.timeout(900)]

SIDE = Path(__file__).resolve().parent / "sagemaker_side"


@pytest.fixture(params=[pytest.param("process"), pytest.param("docker", marks=pytest.mark.docker)])
def runtime(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    return str(request.param)


def test_stock_sdk_pipe_mode_script_reads_its_epochs(seaweedfs_server: servers.S3Server, make_server: Any,
                                                     tmp_path: Path, runtime: str) -> None:
    python = ensure_sagemaker_venv()
    server = make_server("--runtime", runtime, "--object-store", "s3", "--s3-endpoint-url",
                         seaweedfs_server.endpoint_url, env=seaweedfs_server.env())
    bucket = servers.new_bucket(seaweedfs_server, prefix="sdk-pipe")
    env = sdk_environment(server, seaweedfs_server, bucket, tmp_path)
    result_path = tmp_path / "result.json"
    proc = subprocess.run([python, str(SIDE / "fit_pipe.py"), bucket, str(SIDE / "pipe_train.py"), str(result_path)],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:] + server.log()[-3000:]
    result: dict[str, Any] = json.loads(result_path.read_text())
    assert result["status"] == "Completed", result
    assert result["input_mode"] == "Pipe" and result["channels"] == {"train": None, "files": "File"}
    (line,) = [x for x in output.splitlines() if "PIPE {" in x]  # the job's log, as the SDK printed it
    report = json.loads(line[line.index("PIPE {") + len("PIPE "):])
    assert report["epochs"] == [result["expected"]] * 2
    assert report["files"] == "file-mode"
    assert report["config"]["train"]["TrainingInputMode"] == "Pipe"
    assert report["config"]["files"]["TrainingInputMode"] == "File"
