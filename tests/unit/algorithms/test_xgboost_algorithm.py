"""The built-in XGBoost algorithm (murphy.algorithms.xgboost) on a real /opt/ml layout: SageMaker's
hyperparameter names and messages, CSV and libsvm channels, the model file, the printed metrics,
tensors through the hook with a DebugHookConfig, and failures as ClientError."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from murphy.algorithms.xgboost.hyperparameters import UserError, validate
from murphy.runtimes.catalog import ImageCatalog

if os.environ.get("CI"):
    import xgboost as xgb
else:
    xgb = pytest.importorskip("xgboost")

from murphy.trial import create_trial

URI = "246618743249.dkr.ecr.us-west-2.amazonaws.com/sagemaker-xgboost:1.7-1"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, "Missing required hyperparameter: num_round"),
        ({"num_round": "0"}, r"Hyperparameter num_round: 0 is not in \[1, \+inf\)"),
        ({"num_round": "5", "eta": "2"}, r"Hyperparameter eta: 2.0 is not in \[0, 1\]"),
        ({"num_round": "5", "subsample": "0"}, r"Hyperparameter subsample: 0.0 is not in \(0, 1\]"),
        ({"num_round": "ten"}, "Hyperparameter num_round: could not parse value"),
        ({"num_round": "5", "learning_rate": "0.1"}, "Extraneous hyperparameter found: learning_rate"),
        ({"num_round": "5", "objective": "multi:softmax"}, "Require input for parameter 'num_class'"),
        ({"num_round": "5", "num_class": "3"}, "Do not need to setup parameter 'num_class'"),
        ({"num_round": "5", "eval_metric": "auc"}, "Metric 'auc' can only be applied for classification"),
        ({"num_round": "5", "eval_metric": "rmse,bogus"}, "Hyperparameter eval_metric: value \\['bogus'\\] not in range"),
        ({"num_round": "5", "objective": "binary:logistic", "eval_metric": "auc@3"}, "Metric 'auc@3' is not supported"),
        ({"num_round": "5", "objective": "reg:nonsense"}, "Hyperparameter objective: reg:nonsense is not in"),
    ],
)
def test_bad_hyperparameters_get_sagemakers_messages(raw: dict[str, str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        validate(raw)


def test_good_hyperparameters_are_typed_and_platform_keys_ignored() -> None:
    hps = validate({"num_round": "10", "eta": "0.2", "max_depth": "4", "eval_metric": "logloss,error@0.7",
                    "objective": "binary:logistic", "sagemaker_region": '"us-west-2"', "early_stopping_rounds": "3"})
    assert hps == {"num_round": 10, "eta": 0.2, "max_depth": 4, "eval_metric": ["logloss", "error@0.7"],
                   "objective": "binary:logistic", "early_stopping_rounds": 3}
    assert validate({"num_round": "3"})["objective"] == "reg:squarederror"


def test_catalog_maps_aws_xgboost_uris_and_script_mode() -> None:
    catalog = ImageCatalog()
    entry = catalog.resolve(URI, {"num_round": "3"})
    assert (entry.kind, entry.command, entry.docker_image) == (
        "command", ("python", "-m", "murphy.algorithms.xgboost"), "murphy/xgboost:latest")
    script = catalog.resolve(URI, {"sagemaker_program": '"train.py"'})
    assert (script.kind, script.docker_image) == ("script-mode", "murphy/xgboost:latest")


def _layout(tmp: Path, hps: dict[str, str], ctype: str = "text/csv", hook: dict[str, Any] | None = None,
            validation: bool = True) -> Path:
    root = tmp / "opt" / "ml"
    (root / "input" / "config").mkdir(parents=True)
    rng = np.random.default_rng(0)
    z = rng.normal(size=400)
    x = z[:, None] + 0.3 * rng.normal(size=(400, 4))
    y = (z > 0).astype(int)
    channels = {"train": slice(0, 300)} | ({"validation": slice(300, 400)} if validation else {})
    for name, rows in channels.items():
        d = root / "input" / "data" / name
        d.mkdir(parents=True)
        if ctype == "text/csv":
            np.savetxt(d / "part-0.csv", np.column_stack([y[rows], x[rows]]), delimiter=",", fmt="%.6g")
        else:
            lines = [f"{y[i]} " + " ".join(f"{j}:{x[i, j]:.6g}" for j in range(4)) for i in range(rows.start, rows.stop)]
            (d / "part-0.libsvm").write_text("\n".join(lines) + "\n")
    cfg = root / "input" / "config"
    (cfg / "hyperparameters.json").write_text(json.dumps(hps))
    (cfg / "inputdataconfig.json").write_text(json.dumps({n: {"ContentType": ctype} for n in channels}))
    if hook is not None:
        (cfg / "debughookconfig.json").write_text(json.dumps({"LocalPath": str(root / "output" / "tensors"), **hook}))
    return root


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMDEBUG_")}
    env.update(MURPHY_OPT_ML=str(root), TRAINING_JOB_NAME="job")
    return subprocess.run([sys.executable, "-m", "murphy.algorithms.xgboost"], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("ctype", ["text/csv", "text/libsvm"])
def test_trains_prints_metrics_and_saves_the_model(tmp_path: Path, ctype: str) -> None:
    root = _layout(tmp_path, {"num_round": "6", "objective": "binary:logistic", "max_depth": "3",
                              "eval_metric": "logloss"}, ctype)
    proc = _run(root)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    assert len(lines) == 6 and lines[0].startswith("[0]\ttrain-logloss:") and "\tvalidation-logloss:" in lines[0]
    model = xgb.Booster()
    model.load_model(bytearray((root / "model" / "xgboost-model").read_bytes()))
    assert model.num_boosted_rounds() == 6


def test_debug_hook_config_saves_the_configured_collections(tmp_path: Path) -> None:
    hook = {"HookParameters": {"save_interval": "2"},
            "CollectionConfigurations": [{"CollectionName": "metrics"},
                                         {"CollectionName": "feature_importance", "CollectionParameters": {"save_interval": "5"}},
                                         {"CollectionName": "hyperparameters", "CollectionParameters": {"save_steps": "0"}},
                                         {"CollectionName": "trees"}, {"CollectionName": "labels"}]}
    root = _layout(tmp_path, {"num_round": "11", "objective": "binary:logistic", "eval_metric": "logloss,auc"}, hook=hook)
    proc = _run(root)
    assert proc.returncode == 0, proc.stderr
    trial = create_trial(str(root / "output" / "tensors"))
    assert trial.tensor("validation-auc").steps() == [0, 2, 4, 6, 8, 10]
    assert trial.tensor("feature_importance/weight/f0").steps() == [0, 5, 10]
    # save_steps is a union with the hook's interval (smdebug's rule).
    assert trial.tensor("hyperparameters/objective").steps() == [0, 2, 4, 6, 8, 10]
    assert trial.tensor("hyperparameters/num_round").value(0).tolist() == [11]
    assert trial.has_tensor("trees/Node") and trial.has_tensor("labels")
    # Inside a job (TRAINING_JOB_NAME) the platform writes the end marker after its upload.
    assert not (root / "output" / "tensors" / "training_job_end.ts").exists()


@pytest.mark.parametrize(
    ("hps", "validation", "reason"),
    [
        ({"num_round": "3", "eta": "7"}, True, "ClientError: Hyperparameter eta: 7.0 is not in [0, 1]"),
        ({"num_round": "3", "objective": "binary:logistic"}, True, None),
        ({"num_round": "3", "objective": "multi:softmax", "num_class": "2"}, False, None),
    ],
)
def test_failures_are_client_errors_in_the_failure_file(
    tmp_path: Path, hps: dict[str, str], validation: bool, reason: str | None
) -> None:
    root = _layout(tmp_path, hps, validation=validation)
    if reason is None:  # a train channel that is not CSV although the job says text/csv
        for f in (root / "input" / "data" / "train").iterdir():
            f.write_text("1 1:0.5 2:0.1\n0 1:0.2 2:0.3\n")
    proc = _run(root)
    assert proc.returncode == 1
    failure = (root / "output" / "failure").read_text()
    if reason is not None:
        assert failure == reason
    else:
        assert failure.startswith("ClientError: Channel 'train': First line '1 1:0.5 2:0.1...' of file") and "is not 'CSV' format" in failure


def _as_pipe(root: Path, channel: str, mode: dict[str, str] | None = None) -> threading.Thread:
    """Turn ``channel``'s directory into SageMaker's Pipe-mode FIFO ``<channel>_0``, fed by a
    thread (the toolkit's feeder in a job) with the directory's files end to end."""
    d = root / "input" / "data" / channel
    data = b"".join(f.read_bytes() for f in sorted(d.iterdir()))
    for f in d.iterdir():
        f.unlink()
    d.rmdir()
    fifo = root / "input" / "data" / f"{channel}_0"
    os.mkfifo(fifo)
    cfg = root / "input" / "config" / "inputdataconfig.json"
    config = json.loads(cfg.read_text())
    config[channel].update({"TrainingInputMode": "Pipe", "RecordWrapperType": "None", **(mode or {})})
    cfg.write_text(json.dumps(config))

    def feed() -> None:
        with open(fifo, "wb") as f:
            for i in range(0, len(data), 4096):  # in pieces, as a stream arrives
                f.write(data[i:i + 4096])

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("ctype", ["text/csv", "text/libsvm"])
def test_pipe_mode_channels_are_read_from_their_fifo(tmp_path: Path, ctype: str) -> None:
    hps = {"num_round": "6", "objective": "binary:logistic", "max_depth": "3", "eval_metric": "logloss"}
    file_run = _run(_layout(tmp_path / "file", hps, ctype))
    root = _layout(tmp_path / "pipe", hps, ctype)
    feeder = _as_pipe(root, "train")  # validation stays a File channel beside it
    proc = _run(root)
    feeder.join(5)
    assert proc.returncode == 0, proc.stderr
    assert not feeder.is_alive()
    metrics = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    # The same rows in the same order: the same model and metrics as File mode.
    assert metrics == [ln for ln in file_run.stdout.splitlines() if ln.startswith("[")] and len(metrics) == 6


def test_pipe_mode_recordio_is_a_client_error(tmp_path: Path) -> None:
    root = _layout(tmp_path, {"num_round": "3"}, "text/csv")
    feeder = _as_pipe(root, "train", {"RecordWrapperType": "RecordIO"})
    proc = _run(root)
    assert proc.returncode == 1
    reason = (root / "output" / "failure").read_text()
    assert reason.startswith("ClientError: Channel 'train': RecordIO-wrapped data"), reason
    # The feeder is still waiting for a reader that never came: open the FIFO to let it end.
    with open(root / "input" / "data" / "train_0", "rb") as f:
        f.read()
    feeder.join(5)
