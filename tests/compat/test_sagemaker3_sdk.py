"""The STOCK sagemaker SDK 3.x (its own venv, infra/ci/sagemaker3_venv.sh) against a real
``murphy server`` whose ``s3://`` URIs live on SeaweedFS, on the process runtime and on the
Docker runtime, configured only the way docs/sagemaker-compat.md (section 9) tells users to.
Nothing of the SDK is patched.

Per runtime, four SDK processes run concurrently (started by the module fixture): the seed
scenario through ``TrainingJob.create`` with ExplodingTensor (stopped) and its healthy rerun, v3
script mode (``ModelTrainer`` + ``SourceCode``: a bash entrypoint running the SDK's
``sm_train.sh`` from the ``sm_drivers`` channel), and the same script-mode request with a rule
whose image is ``Rule.sagemaker()``'s unresolved ``DEFAULT_RULE_EVALUATOR_IMAGE``.
"""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from compat_harness import REPO
from sdk_harness import Fit, sdk_environment

import servers
from murphy.sdk import CollectionConfig, DebuggerHookConfig, Estimator, Rule, Session, rule_configs
from murphy_server import MakeServer, MurphyServer, server_factory

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.timeout(1500)]

SIDE = Path(__file__).resolve().parent / "sagemaker3_side"
VENV_SCRIPT = REPO / "infra" / "ci" / "sagemaker3_venv.sh"
SCENARIOS = ("create-exploding", "create-healthy", "script", "script-rule")
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
V3_ENTRYPOINT = ["/bin/bash"]
V3_ARGUMENTS = ["-c", "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && /opt/ml/input/data/sm_drivers/sm_train.sh"]


def ensure_sagemaker3_venv() -> str:
    """Create (once) the stock sagemaker 3.x venv; return its python."""
    proc = subprocess.run(["bash", str(VENV_SCRIPT)], capture_output=True, text=True, timeout=1500)
    if proc.returncode != 0:
        raise RuntimeError(f"sagemaker 3.x venv creation failed:\n{proc.stdout}\n{proc.stderr[-5000:]}")
    return proc.stdout.strip().splitlines()[-1]


@dataclass
class Plane:
    runtime: str
    server: MurphyServer
    s3: servers.S3Server
    bucket: str
    fits: dict[str, Fit]


@pytest.fixture(scope="module")
def sagemaker3_python() -> str:
    return ensure_sagemaker3_venv()


@pytest.fixture(scope="module", params=["process", pytest.param("docker", marks=pytest.mark.docker)])
def plane(
    request: pytest.FixtureRequest, seaweedfs_server: servers.S3Server, sagemaker3_python: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Plane]:
    runtime = str(request.param)
    if runtime == "docker":
        request.getfixturevalue("docker_engine")
    factory: Iterator[MakeServer] = server_factory(tmp_path_factory.mktemp(f"murphy-server-{runtime}"))
    make_server = next(factory)
    server = make_server("--runtime", runtime, "--object-store", "s3", "--s3-endpoint-url",
                         seaweedfs_server.endpoint_url, env=seaweedfs_server.env())
    bucket = servers.new_bucket(seaweedfs_server, prefix=f"sagemaker3-{runtime}")
    where = tmp_path_factory.mktemp(f"sagemaker3-{runtime}")
    env = sdk_environment(server, seaweedfs_server, bucket, where)
    # ModelTrainer checks the role's access to the bucket through IAM; murphy answers IAM calls
    # with UnknownOperationException, which the SDK takes as "no answer" (it would go to AWS).
    env.update(AWS_ENDPOINT_URL_IAM=server.endpoint, SAGEMAKER_VALIDATE_ROLE="false")
    fits: dict[str, Fit] = {}
    for scenario in SCENARIOS:
        output, result = where / f"{scenario}.out", where / f"{scenario}.json"
        with open(output, "wb") as out:
            proc = subprocess.Popen(
                [sagemaker3_python, str(SIDE / "run.py"), scenario, bucket, str(SIDE / "source"), str(result)],
                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=where,
            )
        fits[scenario] = Fit(scenario, proc, output, result, time.time())
    try:
        yield Plane(runtime, server, seaweedfs_server, bucket, fits)
    finally:
        for fit in fits.values():
            if fit.proc.poll() is None:
                fit.proc.kill()
                fit.proc.wait()
        print(f"\nstock SDK 3.x runs on {runtime} (s):", {name: fit.seconds for name, fit in fits.items()})
        for _ in factory:  # stops the server
            pass


def model_members(plane: Plane, uri: str) -> list[str]:
    key = uri.removeprefix(f"s3://{plane.bucket}/")
    blob = plane.s3.client().get_object(Bucket=plane.bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        return tar.getnames()


def assert_stopped_by_exploding_tensor(result: dict[str, Any], server: MurphyServer) -> None:
    assert (result["status"], result["secondary"]) == ("Stopped", "Stopped"), (result, server.log()[-3000:])
    [rule] = result["rules"]
    assert (rule["name"], rule["status"]) == ("ExplodingTensor", "IssuesFound"), result
    assert "step" in rule["details"], rule
    # TrainingJob.wait returns at any terminal status and raises only for Failed.
    assert "wait_error" not in result, result


def test_the_seed_scenario_through_training_job_create_is_stopped(plane: Plane) -> None:
    output, result = plane.fits["create-exploding"].wait()
    assert_stopped_by_exploding_tensor(result, plane.server)
    assert result["image"] == "murphy/linear-regression-demo:latest"
    assert result["rule_images"] == ["895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"]
    # wait(logs=True) tailed the training log through murphy's CloudWatch Logs endpoint.
    assert "Step=0, Loss=1.02e+24" in output and "Step=2, Loss=nan" in output, output[-4000:]


def test_the_healthy_rerun_completes_with_no_issues(plane: Plane) -> None:
    output, result = plane.fits["create-healthy"].wait()
    assert (result["status"], result["secondary"]) == ("Completed", "Completed"), (result, plane.server.log()[-3000:])
    assert [r["status"] for r in result["rules"]] == ["NoIssuesFound"]
    assert "wait_error" not in result, result
    assert "Step=9, Loss=" in output


def test_v3_script_mode_trains_as_on_sagemaker(plane: Plane) -> None:
    """ModelTrainer + SourceCode: murphy runs the SDK's own sm_train.sh, its environment.py and
    basic_script_driver.py, which read and write SageMaker's /opt/ml paths, on both runtimes."""
    output, result = plane.fits["script"].wait()
    assert (result["entrypoint"], result["arguments"]) == (V3_ENTRYPOINT, V3_ARGUMENTS), result
    assert result["channels"] == ["code", "sm_drivers"]
    assert "sagemaker_program" not in result["hyperparameters"]
    assert (result["status"], result["secondary"]) == ("Completed", "Completed"), (result, output[-4000:])
    assert "wait_error" not in result, result
    assert "Running Basic Script driver" in output and "Training Container Execution Completed" in output, output[-4000:]
    # The script ran in the code channel, with the SDK's SM_MODEL_DIR, and its model was uploaded.
    assert "cwd /opt/ml/input/data/code model_dir /opt/ml/model hook False" in output, output[-4000:]
    assert "step 5 loss" in output
    assert "model.pt" in model_members(plane, result["model_artifacts"])


def test_v3_script_mode_with_the_placeholder_rule_image_is_stopped(plane: Plane) -> None:
    """The script-mode request plus a rule straight from ``Rule.sagemaker()``: its image is the
    placeholder ``DEFAULT_RULE_EVALUATOR_IMAGE``, which murphy evaluates as the built-in rules."""
    output, result = plane.fits["script-rule"].wait()
    assert (result["entrypoint"], result["arguments"]) == (V3_ENTRYPOINT, V3_ARGUMENTS), result
    assert result["rule_images"] == ["DEFAULT_RULE_EVALUATOR_IMAGE"]
    assert_stopped_by_exploding_tensor(result, plane.server)
    assert "hook True" in output and "step 2 loss inf" in output, output[-4000:]


def test_the_same_script_mode_job_through_murphys_sdk_is_stopped(
    plane: Plane, capsys: pytest.CaptureFixture[str]
) -> None:
    """murphy.sdk's Estimator sends the same entrypoint over the channels SDK 3.x uploaded, with
    ``rules=``: the job trains through sm_train.sh and ExplodingTensor stops it."""
    _, v3 = plane.fits["script-rule"].wait()
    estimator = Estimator(
        image_uri=v3["image"], role=ROLE, output_path=f"s3://{plane.bucket}/",
        hyperparameters={"lr": 1000, "steps": 10, "step_seconds": 2},
        container_entry_point=V3_ENTRYPOINT, container_arguments=V3_ARGUMENTS,
        rules=[Rule.sagemaker(rule_configs.exploding_tensor())],
        debugger_hook_config=DebuggerHookConfig(
            hook_parameters={"save_interval": "1"},
            collection_configs=[CollectionConfig("gradients"), CollectionConfig("losses")]),
        sagemaker_session=Session(endpoint=plane.server.endpoint, region="us-west-2", default_bucket=plane.bucket),
    )
    estimator.fit(inputs=v3["channel_uris"], logs=True)
    out = capsys.readouterr().out
    job = estimator.latest_training_job
    assert job is not None
    described = job.describe()
    assert (described["TrainingJobStatus"], described["SecondaryStatus"]) == ("Stopped", "Stopped"), (
        described, out[-4000:])
    assert [s["RuleEvaluationStatus"] for s in job.rule_job_summary()] == ["IssuesFound"]
    assert "Running Basic Script driver" in out and "step 2 loss inf" in out, out[-4000:]


def test_the_sdk_reached_nothing_but_murphy_and_the_s3_server(plane: Plane) -> None:
    """With section 9's variables no call went to AWS (IAM, STS, telemetry), and no SDK step
    failed quietly along the way."""
    for fit in plane.fits.values():
        output, _ = fit.wait()
        for marker in ("EndpointConnectionError", "Traceback", "Could not connect"):
            assert marker not in output, f"{fit.scenario}: {marker}\n{output[-3000:]}"
        # An AWS endpoint URL (image URIs name amazonaws.com too, but never with a scheme).
        assert not re.search(r"https?://[^\s'\"]*amazonaws\.com", output), f"{fit.scenario}:\n{output[-3000:]}"
