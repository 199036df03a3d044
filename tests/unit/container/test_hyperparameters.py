"""Hyperparameters → argv and ``SM_*`` variables, as SageMaker's training toolkit builds them."""

from __future__ import annotations

import json
from pathlib import Path

from murphy.container.env import (
    OptMl,
    argv_for,
    decode_hyperparameters,
    resource_config,
    sm_environment,
    split_hyperparameters,
    to_cmd_args,
)

SDK_HPS = {  # what the SageMaker SDK sends: every value JSON-encoded into a string
    "sagemaker_program": '"train.py"',
    "sagemaker_submit_directory": '"s3://b/src/sourcedir.tar.gz"',
    "sagemaker_region": '"us-west-2"',
    "sagemaker_distributed_dataparallel_enabled": "false",
    "lr": "0.1",
    "epochs": "10",
    "name": '"run one"',
    "flag": "true",
    "x": "3",
    "opts": '{"b": 2, "a": 1}',
    "plain": "not json",
}


def test_values_are_json_decoded_when_they_parse() -> None:
    d = decode_hyperparameters(SDK_HPS)
    assert d["lr"] == 0.1 and d["epochs"] == 10 and d["name"] == "run one" and d["flag"] is True
    assert d["plain"] == "not json" and d["opts"] == {"b": 2, "a": 1}


def test_user_args_skip_sagemaker_keys_and_follow_the_toolkit() -> None:
    user, platform = split_hyperparameters(decode_hyperparameters(SDK_HPS))
    assert set(platform) == {"sagemaker_program", "sagemaker_submit_directory", "sagemaker_region",
                             "sagemaker_distributed_dataparallel_enabled"}
    assert to_cmd_args(user) == [
        "--epochs", "10", "--flag", "True", "--lr", "0.1", "--name", "run one",
        "--opts", "a=1,b=2", "--plain", "not json", "-x", "3",
    ]


def test_demo_hyperparameters_become_its_arguments() -> None:
    user, _ = split_hyperparameters(decode_hyperparameters(
        {"lr": "100", "scale": "100000000000", "steps": "10", "debug_frequency": "1"}))
    assert to_cmd_args(user) == ["--debug_frequency", "1", "--lr", "100", "--scale", "100000000000", "--steps", "10"]


def test_sm_environment(tmp_path: Path) -> None:
    opt_ml = OptMl(str(tmp_path / "opt" / "ml"))
    data_config = {"train": {"TrainingInputMode": "File"}, "test": {"TrainingInputMode": "File"}}
    env = sm_environment(opt_ml, SDK_HPS, data_config, resource_config("ml.m5.xlarge"),
                         job_name="job-1", num_cpus=4, num_gpus=0)
    assert env["SM_MODEL_DIR"] == opt_ml.model_dir
    assert env["SM_OUTPUT_DATA_DIR"] == opt_ml.output_data_dir
    assert env["SM_CHANNELS"] == '["test","train"]'
    assert env["SM_CHANNEL_TRAIN"] == opt_ml.channel_dir("train")
    assert env["SM_HP_LR"] == "0.1" and env["SM_HP_NAME"] == "run one" and env["SM_HP_OPTS"] == '{"a":1,"b":2}'
    assert "SM_HP_SAGEMAKER_PROGRAM" not in env
    assert json.loads(env["SM_HPS"])["epochs"] == 10
    assert env["SM_CURRENT_HOST"] == "algo-1" and env["SM_HOSTS"] == '["algo-1"]'
    assert env["SM_NUM_CPUS"] == "4" and env["SM_NUM_GPUS"] == "0"
    assert env["SM_MODULE_NAME"] == "train" and env["SM_USER_ENTRY_POINT"] == "train.py"
    assert env["SM_MODULE_DIR"] == "s3://b/src/sourcedir.tar.gz"
    assert json.loads(env["SM_USER_ARGS"])[:2] == ["--epochs", "10"]
    assert json.loads(env["SM_FRAMEWORK_PARAMS"]) == {"sagemaker_distributed_dataparallel_enabled": False}
    training = json.loads(env["SM_TRAINING_ENV"])
    assert training["job_name"] == "job-1" and training["channel_input_dirs"]["test"] == opt_ml.channel_dir("test")
    assert env["SM_INPUT_CONFIG_DIR"] == opt_ml.config_dir and env["SM_OUTPUT_DIR"] == opt_ml.output_dir


def test_entry_point_types(tmp_path: Path) -> None:
    code = str(tmp_path)
    assert argv_for("train.py", ["--a", "1"], code, "/py") == ["/py", "train.py", "--a", "1"]
    assert argv_for("run.sh", ["--a", "1"], code, "/py") == ["/bin/sh", "run.sh", "--a", "1"]
    assert argv_for("train", [], code, "/py") == ["./train"]
    (tmp_path / "setup.py").write_text("")
    assert argv_for("train.py", ["--a", "1"], code, "/py") == ["/py", "-m", "train", "--a", "1"]
