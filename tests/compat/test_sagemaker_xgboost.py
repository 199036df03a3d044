"""The STOCK sagemaker SDK 2.x against a real ``murphy server`` (process and Docker runtimes), with
SageMaker's XGBoost: the built-in algorithm (``image_uris.retrieve("xgboost", region, "1.7-1")``,
CSV channels on S3) with the loss_not_decreasing, tree_depth and feature_importance_overweight
rules, and script mode (``sagemaker.xgboost.XGBoost(entry_point=..., framework_version="1.7-1")``).

The training data has a column that leaks the label (``label + N(0, 0.1)``): the trees split on
it first and stop early, so FeatureImportanceOverweight and TreeDepth find issues while the loss
keeps falling (LossNotDecreasing: none). The server runs with ``--no-stop-on-finding`` (AWS's
semantics) so that every rule reaches its verdict. Both fits of a runtime run concurrently.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_sagemaker_sdk import Fit, ensure_sagemaker_venv, sdk_environment

import servers
from murphy_server import MakeServer, MurphyServer, server_factory

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.timeout(1200)]

SIDE = Path(__file__).resolve().parent / "sagemaker_side"
XGBOOST_IMAGE = "murphy/xgboost:latest"
SCENARIOS = ("builtin", "script")


@dataclass
class Plane:
    server: MurphyServer
    s3: servers.S3Server
    bucket: str
    fits: dict[str, Fit]


def _csv(x: np.ndarray, y: np.ndarray) -> bytes:
    buf = io.StringIO()
    np.savetxt(buf, np.column_stack([y, x]), delimiter=",", fmt="%.6g")
    return buf.getvalue().encode()


def upload_leaky_data(s3: servers.S3Server, bucket: str, prefix: str) -> None:
    rng = np.random.default_rng(1000)
    z = rng.normal(size=3000)
    x = z[:, None] + 0.3 * rng.normal(size=(3000, 10))
    y = (z > 0).astype(int)
    x = np.column_stack([x, y + 0.1 * rng.normal(size=3000)])
    client = s3.client()
    client.put_object(Bucket=bucket, Key=f"{prefix}/train/part-0.csv", Body=_csv(x[:2400], y[:2400]))
    client.put_object(Bucket=bucket, Key=f"{prefix}/validation/part-0.csv", Body=_csv(x[2400:], y[2400:]))


def _require_xgboost_image(docker_engine: Any) -> None:
    if docker_engine.images.list(name=XGBOOST_IMAGE):
        return
    reason = f"{XGBOOST_IMAGE} is not built; run `infra/images/build.sh xgboost` (make images-cpu)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module", params=["process", pytest.param("docker", marks=pytest.mark.docker)])
def plane(
    request: pytest.FixtureRequest, seaweedfs_server: servers.S3Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Plane]:
    runtime = request.param
    if runtime == "docker":
        _require_xgboost_image(request.getfixturevalue("docker_engine"))
    python = ensure_sagemaker_venv()
    make: Iterator[MakeServer] = server_factory(tmp_path_factory.mktemp(f"murphy-xgb-{runtime}"))
    factory = next(make)
    try:
        # AWS semantics (a finding is reported, it does not stop the job): every rule gets its own
        # verdict instead of the first finding stopping the job and the other rules with it.
        server = factory("--runtime", runtime, "--no-stop-on-finding", "--object-store", "s3", "--s3-endpoint-url",
                         seaweedfs_server.endpoint_url, env=seaweedfs_server.env())
        bucket = servers.new_bucket(seaweedfs_server, prefix="sagemaker-xgb")
        upload_leaky_data(seaweedfs_server, bucket, "data")
        where = tmp_path_factory.mktemp(f"sagemaker-xgb-{runtime}")
        env = sdk_environment(server, seaweedfs_server, bucket, where)
        fits: dict[str, Fit] = {}
        for scenario in SCENARIOS:
            output, result = where / f"{scenario}.out", where / f"{scenario}.json"
            with open(output, "wb") as out:
                proc = subprocess.Popen(
                    [python, str(SIDE / "fit_xgboost.py"), scenario, bucket, "data", str(SIDE / "xgb_source"),
                     str(result)], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=where)
            fits[scenario] = Fit(scenario, proc, output, result, time.time())
        try:
            yield Plane(server, seaweedfs_server, bucket, fits)
        finally:
            for fit in fits.values():
                if fit.proc.poll() is None:
                    fit.proc.kill()
                    fit.proc.wait()
    finally:
        make.close()


def _model_members(plane: Plane, model_data: str) -> list[str]:
    key = model_data.split(f"s3://{plane.bucket}/", 1)[1]
    body = plane.s3.client().get_object(Bucket=plane.bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        return tar.getnames()


def test_builtin_algorithm_with_xgboost_rules(plane: Plane) -> None:
    output, result = plane.fits["builtin"].wait()
    assert result["status"] == "Completed", (result, plane.server.log()[-3000:])
    assert result["image"] == "246618743249.dkr.ecr.us-west-2.amazonaws.com/sagemaker-xgboost:1.7-1"
    assert result["rules"] == {"LossNotDecreasing": "NoIssuesFound", "TreeDepth": "IssuesFound",
                               "FeatureImportanceOverweight": "IssuesFound", "CreateXgboostReport": "NoIssuesFound"}, (
        result["rule_details"])
    # The report where SageMaker's report rule put it: the rule's output under the job.
    report = plane.s3.client().get_object(
        Bucket=plane.bucket, Key=f"{result['job_name']}/rule-output/CreateXgboostReport/xgboost_report.html")
    html = report["Body"].read().decode()
    assert "<h2>Feature importance</h2>" in html and "<svg" in html and "validation-logloss" in html
    assert "feature_importance/weight/f10" in result["rule_details"]["FeatureImportanceOverweight"]
    assert {"feature_importance", "trees", "metrics", "losses"} <= set(result["collections"])
    # The algorithm's metric lines, through murphy's CloudWatch Logs endpoint.
    assert "[0]\ttrain-logloss:" in output or "[0]#011train-logloss:" in output, output[-3000:]
    assert "validation-logloss:" in output
    assert any(m.endswith("xgboost-model") for m in _model_members(plane, result["model_data"]))


def test_script_mode_xgboost_estimator(plane: Plane) -> None:
    output, result = plane.fits["script"].wait()
    assert result["status"] == "Completed", (result, plane.server.log()[-3000:])
    assert result["rules"] == {"FeatureImportanceOverweight": "IssuesFound"}, result["rule_details"]
    # The script's unchanged `from smdebug.xgboost import Hook` got murphy's alias (no fallback).
    assert "hook from smdebug.xgboost (murphy's alias)" in output, output[-3000:]
    assert any(m.endswith("xgboost-model.json") for m in _model_members(plane, result["model_data"]))


