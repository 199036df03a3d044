"""The STOCK sagemaker SDK 2.x runs the article's TensorFlow estimator
(``sagemaker.tensorflow.TensorFlow(entry_point="script-v2.py", framework_version="2.16", ...)``,
its script with the original ``import smdebug.tensorflow as smd``) against ``murphy server``:
ExplodingTensor finds the issue, the job is Stopped, and the trial at the debugger artifacts path
lists the article's three kinds of tensor names.

* process runtime: an image catalog file maps AWS's TF training image URI to script mode with the
  TF venv's interpreter (infra/ci/tf_venv.sh), since the service's venv has no TensorFlow;
* Docker runtime: the built-in catalog maps the URI to murphy/tensorflow-cpu (``make images-cpu``).

Needs the sagemaker venv and SeaweedFS; the Docker case dockerd and the image.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from compat_harness import REPO
from test_sagemaker_sdk import ensure_sagemaker_venv, sdk_environment

import servers
from murphy.trial import create_trial
from murphy_server import server_factory

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.tf, pytest.mark.timeout(900)]

SIDE = Path(__file__).resolve().parent / "sagemaker_side"
SEED = REPO / "training_images" / "examples" / "tf_seed" / "script-v2.py"
TF_IMAGE = "murphy/tensorflow-cpu:latest"


def _tf_python() -> str:
    proc = subprocess.run(["bash", str(REPO / "infra" / "ci" / "tf_venv.sh")], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"TensorFlow venv creation failed:\n{proc.stderr[-5000:]}")
    return proc.stdout.strip().splitlines()[-1]


def _server_args(request: pytest.FixtureRequest, runtime: str, where: Path) -> tuple[list[str], dict[str, str]]:
    if runtime == "docker":
        engine = request.getfixturevalue("docker_engine")
        if not engine.images.list(name=TF_IMAGE):
            reason = f"{TF_IMAGE} is not built; run `make images-cpu`"
            if os.environ.get("CI"):
                pytest.fail(reason)
            pytest.skip(reason)
        return ["--runtime", "docker"], {}
    catalog = where / "catalog.json"
    catalog.write_text(json.dumps({"images": [
        {"pattern": "*tensorflow-training*", "kind": "script-mode", "python": _tf_python(),
         "description": "AWS TensorFlow training images, run with the TF venv"}]}))
    # The TF venv's murphy is this checkout's, whatever checkout built the venv.
    return ["--runtime", "process"], {"MURPHY_IMAGE_CATALOG": str(catalog), "PYTHONPATH": str(REPO / "service")}


@pytest.mark.parametrize("runtime", ["process", pytest.param("docker", marks=pytest.mark.docker)])
def test_article_tensorflow_estimator_is_stopped_by_exploding_tensor(
    runtime: str, request: pytest.FixtureRequest, seaweedfs_server: servers.S3Server, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args, extra_env = _server_args(request, runtime, tmp_path)
    python = ensure_sagemaker_venv()
    source = tmp_path / "source"
    source.mkdir()
    (source / "script-v2.py").write_text(
        SEED.read_text().replace("import murphy.hook.tensorflow as smd\n", "import smdebug.tensorflow as smd\n"))
    (tmp_path / "server").mkdir()
    gen = server_factory(tmp_path / "server")
    make = next(gen)
    try:
        server = make(*args, "--object-store", "s3", "--s3-endpoint-url", seaweedfs_server.endpoint_url,
                      env={**seaweedfs_server.env(), **extra_env})
        bucket = servers.new_bucket(seaweedfs_server, prefix="sagemaker-tf")
        env = sdk_environment(server, seaweedfs_server, bucket, tmp_path)
        result_path = tmp_path / "result.json"
        proc = subprocess.run([python, str(SIDE / "fit_tf.py"), bucket, str(source), str(result_path)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=700, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout[-6000:] + "\n--- server ---\n" + server.log()[-3000:]
        result = json.loads(result_path.read_text())
        assert "tensorflow-training:2.16-cpu-py310" in result["image"]
        assert result["rule"] == ["ExplodingTensor", "IssuesFound"], result
        assert (result["status"], result["secondary"]) == ("Stopped", "Stopped"), result
        assert "Loss=nan" in proc.stdout
        for key, value in seaweedfs_server.env().items():
            monkeypatch.setenv(key, value)
        names: Any = create_trial(result["artifacts"]).tensor_names()
        assert "loss/loss:0" in names and "initialize/weight1:0" in names, names
        assert "gradients/multiply/MatMul_1_grad/tuple/control_dependency_1:0" in names, names
    finally:
        gen.close()
