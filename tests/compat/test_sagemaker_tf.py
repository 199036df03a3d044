"""The STOCK sagemaker SDK 2.x runs the article's TensorFlow estimator
(``sagemaker.tensorflow.TensorFlow(entry_point="script-v2.py", framework_version="2.16", ...)``,
its script with the original ``import smdebug.tensorflow as smd``) against ``murphy server`` on
the Docker runtime: AWS's TF training image URI runs as murphy/tensorflow-cpu, ExplodingTensor
finds the issue, the job is Stopped, and the trial at the debugger artifacts path lists the
article's three kinds of tensor names.

Needs the sagemaker venv, SeaweedFS, dockerd and murphy/tensorflow-cpu (``make images-cpu``).
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

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(900)]

SIDE = Path(__file__).resolve().parent / "sagemaker_side"
SEED = REPO / "training_images" / "examples" / "tf_seed" / "script-v2.py"
TF_IMAGE = "murphy/tensorflow-cpu:latest"


def test_article_tensorflow_estimator_is_stopped_by_exploding_tensor(
    seaweedfs_server: servers.S3Server, docker_engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not docker_engine.images.list(name=TF_IMAGE):
        reason = f"{TF_IMAGE} is not built; run `make images-cpu`"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    python = ensure_sagemaker_venv()
    source = tmp_path / "source"
    source.mkdir()
    (source / "script-v2.py").write_text(
        SEED.read_text().replace("import murphy.hook.tensorflow as smd\n", "import smdebug.tensorflow as smd\n"))
    (tmp_path / "server").mkdir()
    gen = server_factory(tmp_path / "server")
    make = next(gen)
    try:
        server = make("--runtime", "docker", "--object-store", "s3", "--s3-endpoint-url", seaweedfs_server.endpoint_url,
                      env=seaweedfs_server.env())
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
        names = create_trial(result["artifacts"]).tensor_names()
        assert "loss/loss:0" in names and "initialize/weight1:0" in names, names
        assert "gradients/multiply/MatMul_1_grad/tuple/control_dependency_1:0" in names, names
    finally:
        gen.close()
