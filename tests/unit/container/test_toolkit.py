"""The toolkit run in-process on a hand-made ``/opt/ml`` (the program itself is a real process)."""

from __future__ import annotations

import io
import json
import signal
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from murphy.container.env import OptMl
from murphy.container.toolkit import Toolkit

PROGRAM = """
import json, os, sys
open(os.path.join(os.environ["SM_MODEL_DIR"], "argv.json"), "w").write(json.dumps(sys.argv[1:]))
os.makedirs(os.environ["T"], exist_ok=True)
open(os.path.join(os.environ["T"], "x.bin"), "wb").write(b"t")
sys.exit(int(os.environ.get("CODE", "0")))
"""


@pytest.fixture(autouse=True)
def _restore_signals() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def make(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hps: dict[str, str], **config: Any) -> OptMl:
    opt_ml = OptMl(str(tmp_path / "c" / "opt" / "ml"))
    for d in opt_ml.layout():
        Path(d).mkdir(parents=True, exist_ok=True)
    Path(opt_ml.config_file("hyperparameters.json")).write_text(json.dumps(hps))
    Path(opt_ml.config_file("murphy.json")).write_text(json.dumps(config))
    monkeypatch.setenv("MURPHY_STAGE_FILE", str(tmp_path / "c" / "stage.json"))
    monkeypatch.setenv("SM_MODEL_DIR", opt_ml.model_dir)
    monkeypatch.setenv("T", opt_ml.tensors_dir)
    return opt_ml


def members(blob: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        return tar.getnames()


def test_command_program_gets_hyperparameters_and_artifacts_are_uploaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, tensors = tmp_path / "out", tmp_path / "tensors"
    opt_ml = make(tmp_path, monkeypatch, {"lr": "0.5", "sagemaker_program": '"x.py"', "name": '"a b"'},
                  kind="command", command=[sys.executable, "-c", PROGRAM], output_uri=str(out),
                  tensor_uri=str(tensors))
    monkeypatch.setenv("CODE", "3")
    assert Toolkit(opt_ml, mirror_interval=0.01).run() == 3
    assert json.loads(Path(opt_ml.model_dir, "argv.json").read_text()) == ["--lr", "0.5", "--name", "a b"]
    assert "argv.json" in members((out / "model.tar.gz").read_bytes())
    assert (out / "output.tar.gz").exists()
    # Final pass without a collections file still uploads, then the end marker.
    assert (tensors / "x.bin").read_bytes() == b"t" and (tensors / "training_job_end.ts").read_bytes() == b""
    assert json.loads((tmp_path / "c" / "stage.json").read_text())["stage"] == "Uploading"
    assert not Path(opt_ml.failure_file).exists()


def test_container_arguments_replace_the_hyperparameter_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opt_ml = make(tmp_path, monkeypatch, {"lr": "0.5"}, kind="command", command=[sys.executable, "-c", PROGRAM],
                  container_arguments=["--only", "this"])
    assert Toolkit(opt_ml).run() == 0
    assert json.loads(Path(opt_ml.model_dir, "argv.json").read_text()) == ["--only", "this"]


def test_an_empty_failure_file_is_filled_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kubernetes creates the terminationMessagePath file (/opt/ml/output/failure) empty before the
    container starts; the toolkit's own failure must still land in it."""
    opt_ml = make(tmp_path, monkeypatch, {}, kind="command", command=[sys.executable, "-c", "pass"],
                  tensor_uri=str(tmp_path / "tensors"), output_uri=str(tmp_path / "out"),
                  channels=[{"name": "train", "uri": (tmp_path / "no-such-data").as_uri()}])
    Path(opt_ml.failure_file).parent.mkdir(parents=True, exist_ok=True)
    Path(opt_ml.failure_file).write_text("")
    assert Toolkit(opt_ml).run() == 1
    assert "channel 'train'" in Path(opt_ml.failure_file).read_text()


def test_a_missing_channel_is_a_failure_with_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tensors = tmp_path / "tensors"
    opt_ml = make(tmp_path, monkeypatch, {}, kind="command", command=[sys.executable, "-c", "raise SystemExit(9)"],
                  tensor_uri=str(tensors), output_uri=str(tmp_path / "out"),
                  channels=[{"name": "train", "uri": (tmp_path / "no-such-data").as_uri()}])
    assert Toolkit(opt_ml).run() == 1
    failure = Path(opt_ml.failure_file).read_text()
    assert "channel 'train'" in failure and "no-such-data" in failure
    # Rules waiting on the tensors still learn that training is over; no artifacts without a run.
    assert (tensors / "training_job_end.ts").exists()
    assert not (tmp_path / "out").exists()


def test_script_mode_without_a_program_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opt_ml = make(tmp_path, monkeypatch, {"lr": "1"}, kind="script-mode")
    assert Toolkit(opt_ml).run() == 1
    assert "sagemaker_program" in Path(opt_ml.failure_file).read_text()


def test_script_mode_program_not_in_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "other.py").write_text("")
    opt_ml = make(tmp_path, monkeypatch, {"sagemaker_program": '"train.py"',
                                          "sagemaker_submit_directory": json.dumps(src.as_uri())}, kind="script-mode")
    assert Toolkit(opt_ml).run() == 1
    assert "'train.py' is not in the source directory" in Path(opt_ml.failure_file).read_text()
    assert Path(opt_ml.code_dir, "other.py").exists()  # a directory source is copied
