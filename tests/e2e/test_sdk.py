"""murphy.sdk end to end: the embedded service, a real ``murphy server``, and ``murphy run``.

The SDK talks to the service only through boto3 (SageMaker JSON 1.1 and CloudWatch Logs), so
these tests exercise the same wire any SageMaker client uses. Output is captured, so the SDK
is in plain (non-terminal) mode: the rule box is printed again whenever a status changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from murphy.runtimes import procfs
from murphy.sdk import Estimator, PyTorch, Rule, UnexpectedStatusException, embedded, rule_configs
from murphy.sdk.watch import PlainView
from murphy.trial import create_trial

DEMO_IMAGE = "murphy/linear-regression-demo:latest"
SCRIPT_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.1-cpu-py310"
EXPLODING = {"lr": 100, "scale": 1e11, "steps": 10, "debug_frequency": 1}
HEALTHY = {"lr": 0.001, "scale": 1, "steps": 10, "debug_frequency": 1}
BOX_TOP = "********* Debugger Rule Status *********"


def kill_job_processes(data_dir: Path) -> None:
    """Leave nothing running: SIGKILL the container process groups a service started there that
    are still alive (pid and start time from the process runtime's handle.json, so a reused pid
    is never hit)."""
    for handle in (data_dir / "containers").glob("*/handle.json"):
        with contextlib.suppress(ValueError, KeyError, OSError):
            data = json.loads(handle.read_text())["data"]
            if procfs.alive(int(data["pid"]), data["start_time"]):
                os.killpg(int(data["pgid"]), signal.SIGKILL)


@pytest.fixture
def embedded_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh embedded service per test (data under tmp_path), stopped afterwards."""
    data = tmp_path / "murphy"
    monkeypatch.setenv("MURPHY_DATA_DIR", str(data))
    for var in ("MURPHY_ENDPOINT", "MURPHY_S3_LOCAL_ROOT", "MURPHY_DEFAULT_BUCKET"):
        monkeypatch.delenv(var, raising=False)
    yield data
    embedded.shutdown()
    kill_job_processes(data)


def seed_estimator(hyperparameters: dict[str, Any], **kwargs: Any) -> Estimator:
    return Estimator(image_uri=DEMO_IMAGE, hyperparameters=hyperparameters,
                     rules=[Rule.sagemaker(rule_configs.exploding_tensor())], **kwargs)


def boxes(out: str) -> list[str]:
    """The rule status of every box printed, in order."""
    return [line.split(":")[1].strip() for line in out.splitlines() if line.startswith("*    ExplodingTensor:")]


@pytest.mark.slow
def test_exploding_job_is_stopped_by_its_rule_and_summarised(embedded_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    estimator = seed_estimator(EXPLODING)
    estimator.fit()  # Stopped: a warning, not an exception
    out = capsys.readouterr().out
    assert boxes(out)[0] == "InProgress" and boxes(out)[-1] == "IssuesFound"
    assert out.index(BOX_TOP) < out.index("Step=2, Loss=nan")
    assert "Step=0, Loss=1.02e+24" in out
    job = estimator.latest_training_job
    assert job is not None
    path = estimator.latest_job_debugger_artifacts_path()
    assert path == f"s3://murphy-default/{job.name}/debug-output"
    assert f"Training job {job.name} ended: Stopped (Stopped)" in out
    assert f"Dashboard: {estimator.sagemaker_session.endpoint}/ui/jobs/{job.name}" in out
    assert "  rule ExplodingTensor: IssuesFound (fired at step 2)" in out
    assert f"  tensors: {path}" in out
    assert job.describe()["TrainingJobStatus"] == "Stopped"
    assert [r["RuleEvaluationStatus"] for r in job.rule_job_summary()] == ["IssuesFound"]
    # create_trial in this process resolves s3:// like the service (MURPHY_S3_LOCAL_ROOT was set).
    gradient = create_trial(path).tensor("gradient/LinearRegression_weight")
    assert 1e22 < float(np.abs(gradient.value(0)).max()) < 1e25
    assert np.isnan(gradient.value(2)).all()


@pytest.mark.slow
def test_healthy_job_completes(embedded_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    estimator = seed_estimator(HEALTHY, base_job_name="healthy")
    estimator.fit()
    out = capsys.readouterr().out
    job = estimator.latest_training_job
    assert job is not None and job.name.startswith("healthy-")
    assert boxes(out)[-1] == "NoIssuesFound"
    assert f"Training job {job.name} ended: Completed (Completed)" in out
    assert job.describe()["TrainingJobStatus"] == "Completed"


@pytest.mark.slow
def test_script_mode_with_a_source_dir(embedded_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "helper.py").write_text("GREETING = 'hello from the source dir'\n")
    (src / "train.py").write_text(
        "import helper\n"
        "from murphy.demos.linear_regression import main\n"
        "print(helper.GREETING, flush=True)\n"
        "main()\n"
    )
    estimator = PyTorch(entry_point="train.py", source_dir=str(src), framework_version="2.1", py_version="py310",
                        hyperparameters={"lr": 0.001, "scale": 1, "steps": 3, "debug_frequency": 1},
                        rules=[Rule.sagemaker(rule_configs.exploding_tensor())])
    estimator.fit()
    out = capsys.readouterr().out
    assert "hello from the source dir" in out
    assert "Step=2, Loss=" in out
    job = estimator.latest_training_job
    assert job is not None
    description = job.describe()
    assert description["TrainingJobStatus"] == "Completed"
    assert description["AlgorithmSpecification"]["TrainingImage"].endswith("/pytorch-training:2.1-cpu-py310")
    assert description["HyperParameters"]["sagemaker_program"] == '"train.py"'
    assert description["HyperParameters"]["sagemaker_submit_directory"] == (
        f'"s3://murphy-default/{job.name}/source/sourcedir.tar.gz"')
    assert create_trial(str(estimator.latest_job_debugger_artifacts_path())).steps() == [0, 1, 2]


@pytest.mark.slow
def test_a_failed_job_raises_with_its_failure_reason(embedded_env: Path, tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("raise SystemExit('the training data is missing')\n")
    estimator = Estimator(entry_point=str(script), image_uri=SCRIPT_IMAGE)
    with pytest.raises(UnexpectedStatusException, match="the training data is missing") as e:
        estimator.fit()
    assert e.value.actual_status == "Failed"


class InterruptOnce(PlainView):
    """Plain output that raises KeyboardInterrupt (as Ctrl-C would) once a marker line shows."""

    def __init__(self, marker: str) -> None:
        import io

        super().__init__(io.StringIO())
        self.marker = marker
        self.fired = False

    def line(self, text: str) -> None:
        super().line(text)
        if self.marker in text and not self.fired:
            self.fired = True
            raise KeyboardInterrupt


@pytest.mark.slow
def test_ctrl_c_asks_and_stops_the_job(embedded_env: Path, tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text("import time\nprint('training started', flush=True)\ntime.sleep(120)\n")
    estimator = Estimator(entry_point=str(script), image_uri=SCRIPT_IMAGE)
    estimator.fit(wait=False)
    job = estimator.latest_training_job
    assert job is not None
    questions: list[str] = []

    def yes(question: str) -> str:
        questions.append(question)
        return "y"

    view = InterruptOnce("training started")
    description = job.wait(view=view, prompt=yes)
    assert questions == [f"Stop training job {job.name}? [y/N] "]
    assert description["TrainingJobStatus"] == "Stopped"
    assert f"Stop requested for training job {job.name}." in view.out.getvalue()  # type: ignore[attr-defined]


@pytest.mark.slow
def test_estimator_against_a_murphy_server(make_server: Any, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    server = make_server()
    monkeypatch.setenv("MURPHY_S3_LOCAL_ROOT", str(server.data_dir / "buckets"))
    monkeypatch.delenv("MURPHY_DEFAULT_BUCKET", raising=False)
    with pytest.raises(ValueError, match="output_path"):
        seed_estimator(EXPLODING, endpoint=server.endpoint).fit()
    estimator = seed_estimator(EXPLODING, endpoint=server.endpoint, output_path="s3://team-bucket/runs")
    estimator.fit()
    out = capsys.readouterr().out
    assert boxes(out)[-1] == "IssuesFound"
    assert embedded.current() is None  # a named server: nothing embedded was started
    path = estimator.latest_job_debugger_artifacts_path()
    assert path is not None and path.startswith("s3://team-bucket/runs/")
    assert "gradient/LinearRegression_weight" in create_trial(path).tensor_names()


def murphy(args: list[str], cwd: Path, data: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MURPHY_ENDPOINT", "MURPHY_S3_LOCAL_ROOT")}
    env.update({"MURPHY_DATA_DIR": str(data), "PYTHONUNBUFFERED": "1"})
    return subprocess.run([sys.executable, "-m", "murphy.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=180, check=False)


@pytest.mark.slow
def test_murphy_run_as_a_process(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("from murphy.demos.linear_regression import main\nmain()\n")
    (tmp_path / "broken.py").write_text("raise SystemExit(3)\n")
    data = tmp_path / "data"
    try:
        proc = murphy(["run", "train.py", "--rule", "exploding_tensor", "--hp", "lr=100", "--hp", "scale=1e11",
                       "--hp", "steps=10", "--hp", "debug_frequency=1"], tmp_path, data)
        assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]  # a rule found issues
        assert boxes(proc.stdout)[-1] == "IssuesFound"
        assert "rule ExplodingTensor: IssuesFound (fired at step 2)" in proc.stdout
        assert (tmp_path / "data" / "murphy.db").exists()
        failed = murphy(["run", "broken.py"], tmp_path, data)
        assert failed.returncode == 1, failed.stderr[-3000:]
        assert "Failed" in failed.stderr
        usage = murphy(["run", "train.py", "--rule", "no_such_rule"], tmp_path, data)
        assert usage.returncode == 2 and "unknown rule 'no_such_rule'" in usage.stderr
    finally:
        kill_job_processes(data)
