"""murphy/tensorflow-cpu on the Docker runtime: the article's script with its ORIGINAL hook import
(``import smdebug.tensorflow as smd``), launched under AWS's TensorFlow training image URI (the
catalog maps it to murphy/tensorflow-cpu), logs Loss=nan from step 2 and its mirrored tensors are
the article's trial.

Needs dockerd and ``infra/images/build.sh tensorflow-cpu`` (skips without the image locally,
fails in CI, like every Docker test).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from runtime_support import DockerEnv, script_plan, tarball

from murphy.trial import create_trial

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "training_images" / "examples" / "tf_seed" / "script-v2.py"
AWS_TF = "763104351884.dkr.ecr.us-west-2.amazonaws.com/tensorflow-training:2.16.2-cpu-py310-ubuntu20.04-sagemaker"
TF_IMAGE = "murphy/tensorflow-cpu:latest"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, docker_engine: Any) -> Iterator[DockerEnv]:
    if not docker_engine.images.list(name=TF_IMAGE):  # type: ignore[attr-defined]
        reason = f"{TF_IMAGE} is not built; run `infra/images/build.sh tensorflow-cpu`"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    e = DockerEnv(tmp_path_factory.mktemp("docker-tf"), docker_engine)
    yield e
    e.close()


def test_article_script_runs_unchanged_in_the_tensorflow_image(env: DockerEnv) -> None:
    text = SEED.read_text().replace("import murphy.hook.tensorflow as smd\n", "import smdebug.tensorflow as smd\n")
    env.bucket("tfsrc/sourcedir.tar.gz").parent.mkdir(parents=True, exist_ok=True)
    env.bucket("tfsrc/sourcedir.tar.gz").write_bytes(tarball({"script-v2.py": text}))
    hps = {"sagemaker_program": '"script-v2.py"', "sagemaker_submit_directory": '"s3://b/tfsrc/sourcedir.tar.gz"',
           "lr": "100", "scale": "100000000000", "steps": "10", "debug_frequency": "1"}
    plan = script_plan("sm-tf-seed", "unused", image=AWS_TF, hyperparameters=hps,
                       debug_hook_config={"LocalPath": "/opt/ml/output/tensors", "S3OutputPath": "s3://b/tensors"},
                       tensor_uri="s3://b/tensors/sm-tf-seed/debug-output")
    h = env.launch(plan)
    state = env.wait(h, timeout=300)
    log = "\n".join(e.message for e in env.rt.read_logs(h).events)
    assert state.exit_code == 0, log[-4000:]
    env.check_container(h, TF_IMAGE, "sm-tf-seed")
    assert "Step=2, Loss=nan" in log and "Step=9, Loss=nan" in log, log[-4000:]
    trial = create_trial(str(env.bucket("tensors/sm-tf-seed/debug-output")))
    assert sorted(trial.tensor_names()) == [
        "gradients/multiply/MatMul_1_grad/tuple/control_dependency_1:0", "initialize/weight1:0", "loss/loss:0",
    ]
    assert trial.steps() == list(range(10))
    assert np.isnan(trial.tensor("loss/loss:0").value(2)).all()
    assert np.isfinite(trial.tensor("loss/loss:0").value(1)).all()


def test_make_demo_tf_tells_the_article_with_tensorflow(env: DockerEnv, tmp_path: Path) -> None:
    """`make demo-tf`'s script (the images are built by the fixture's precondition)."""
    import subprocess
    import sys

    demo = REPO / "training_images" / "examples" / "tf_seed" / "demo_tf.py"
    proc = subprocess.run([sys.executable, str(demo)], cwd=tmp_path, capture_output=True, text=True, timeout=400,
                          env={**os.environ, "MURPHY_RUNTIME": "docker", "MURPHY_DATA_DIR": str(tmp_path / ".murphy")})
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-4000:]
    assert "ExplodingTensor\nIssuesFound" in out
    assert "rule ExplodingTensor: IssuesFound (fired at step 2)" in out
    assert ("tensors: ['gradients/multiply/MatMul_1_grad/tuple/control_dependency_1:0', "
            "'initialize/weight1:0', 'loss/loss:0']") in out
    assert "step 2  Value:  [[nan] [nan]]" in out
    assert "lr=100" in out and "scale=1e+11" in out
