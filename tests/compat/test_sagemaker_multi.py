"""The STOCK sagemaker SDK 2.x runs a 2-host ``torch_distributed`` job against a real ``murphy
server`` (process and Docker runtimes, tensors on SeaweedFS): ``PyTorch(..., instance_count=2,
distribution={"torch_distributed": {"enabled": True}})`` with an unchanged torch.distributed
script, a NaN on rank 1 only, found by the SDK's ExplodingTensor rule; both hosts stopped
(issue 17 §4). The SDK venv is the one test_sagemaker_sdk.py builds (infra/ci/sagemaker_venv.sh).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sdk_harness import sdk_environment
from test_sagemaker_sdk import ensure_sagemaker_venv

import servers
from murphy.trial import create_trial

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.timeout(900)]

SIDE = Path(__file__).resolve().parent / "sagemaker_side"
SCRIPT = Path(__file__).resolve().parents[1] / "e2e" / "multi_instance_script.py"


@pytest.fixture(params=[pytest.param("process"), pytest.param("docker", marks=pytest.mark.docker)])
def runtime(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    return str(request.param)


def test_stock_sdk_two_host_torch_distributed_nan_on_rank_1_is_found(
        seaweedfs_server: servers.S3Server, make_server: Any, tmp_path: Path, runtime: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    python = ensure_sagemaker_venv()
    server = make_server("--runtime", runtime, "--object-store", "s3", "--s3-endpoint-url",
                         seaweedfs_server.endpoint_url, env=seaweedfs_server.env())
    bucket = servers.new_bucket(seaweedfs_server, prefix="sdk-multi")
    env = sdk_environment(server, seaweedfs_server, bucket, tmp_path)
    result_path = tmp_path / "result.json"
    proc = subprocess.run([python, str(SIDE / "fit_multi.py"), bucket, str(SCRIPT), str(result_path)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:] + server.log()[-3000:]
    result: dict[str, Any] = json.loads(result_path.read_text())
    assert (result["status"], result["secondary"]) == ("Stopped", "Stopped"), server.log()[-3000:]
    assert result["instance_count"] == 2
    assert result["hyperparameters"]["sagemaker_torch_distributed_enabled"] == "true"
    [summary] = result["rule_summary"]
    assert summary["RuleEvaluationStatus"] == "IssuesFound", summary
    assert "at step 4 " in summary["StatusDetails"] and "on worker_1" in summary["StatusDetails"], summary
    # The SDK followed both hosts' log streams (it waits for InstanceCount of them).
    assert "rank 0 step 0" in output and "rank 1 step 0" in output, output[-4000:]
    for key, value in seaweedfs_server.env().items():
        monkeypatch.setenv(key, value)
    trial = create_trial(result["artifacts"])
    assert trial.workers() == ["worker_0", "worker_1"]
