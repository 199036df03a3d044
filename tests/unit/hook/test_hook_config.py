"""debughookconfig.json parsing: the SageMaker schema, layering, and strict errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from murphy.core.modes import ModeKeys
from murphy.exceptions import HookError
from murphy.hook import HookConfig, ReductionConfig
from murphy.hook.config import DEFAULT_LOCAL_PATH

FULL: dict[str, Any] = {
    "LocalPath": "/tmp/tensors",
    "S3OutputPath": "s3://bucket/debug",
    "HookParameters": {
        "save_interval": "10",
        "train.save_interval": "5",
        "save_steps": "1,2",
        "start_step": "0",
        "end_step": "100",
        "eval.end_step": "20",
        "reductions": "min,abs_mean,l2_norm",
        "save_raw_tensor": "TRUE",
        "save_shape": "false",
        "save_all": "False",
        "include_regex": "fc1.*, relu",
        "include_workers": "all",
    },
    "CollectionConfigurations": [
        {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "3", "eval.save_interval": "7"}},
        {"CollectionName": "losses", "CollectionParameters": {}},
        {
            "CollectionName": "relu_output",
            "CollectionParameters": {"include_regex": ".*relu_output", "reductions": "max", "save_histogram": "false"},
        },
    ],
}


def test_full_config_is_parsed() -> None:
    cfg = HookConfig.from_dict(FULL)
    assert cfg.out_dir == "/tmp/tensors"
    assert cfg.s3_output_path == "s3://bucket/debug"
    assert cfg.include_workers == "all"
    assert cfg.save_all is False
    assert cfg.include_regex == ("fc1.*", "relu")
    assert cfg.include_collections == ("gradients", "losses", "relu_output")
    assert cfg.reduction_config == ReductionConfig(
        reductions=["min"], abs_reductions=["mean"], norms=["l2"], save_raw_tensor=True
    )
    assert cfg.save_config is not None
    train = cfg.save_config.get_save_config(ModeKeys.TRAIN)
    assert (train.save_interval, tuple(train.save_steps), train.end_step) == (5, (1, 2), 100)
    evl = cfg.save_config.get_save_config(ModeKeys.EVAL)
    assert (evl.save_interval, evl.end_step) == (10, 20)


def test_collection_keys_win_over_hook_keys() -> None:
    cfg = HookConfig.from_dict(FULL)
    grads, losses, relu = cfg.collections
    assert grads.save_config is not None
    # collection general key beats the hook's mode-prefixed key; hook's other keys are inherited
    t = grads.save_config.get_save_config(ModeKeys.TRAIN)
    assert (t.save_interval, tuple(t.save_steps), t.end_step) == (3, (1, 2), 100)
    e = grads.save_config.get_save_config(ModeKeys.EVAL)
    assert (e.save_interval, e.end_step) == (7, 20)
    assert losses.save_config is None and losses.reduction_config is None
    assert relu.include_regex == (".*relu_output",)
    assert relu.reduction_config == ReductionConfig(reductions=["max"])
    assert relu.save_histogram is False


def test_defaults_and_empty_document() -> None:
    cfg = HookConfig.from_dict({})
    assert cfg.out_dir == DEFAULT_LOCAL_PATH
    assert cfg.save_config is None and cfg.reduction_config is None
    assert cfg.include_collections == () and cfg.include_workers == "one"


def test_json_numbers_and_bools_are_accepted() -> None:
    cfg = HookConfig.from_dict({"HookParameters": {"save_interval": 100, "save_all": True, "save_raw_tensor": False}})
    assert cfg.save_all is True
    assert cfg.save_config is not None
    assert cfg.save_config.get_save_config(ModeKeys.PREDICT).save_interval == 100


def test_load_from_env_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "hook.json"
    path.write_text(json.dumps(FULL))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(path))
    assert HookConfig.default_path() == str(path)
    assert HookConfig.load().out_dir == "/tmp/tensors"


def test_default_path_without_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SMDEBUG_CONFIG_FILE_PATH", raising=False)
    assert HookConfig.default_path() == "/opt/ml/input/config/debughookconfig.json"


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"save_interval": "ten"}, "HookParameters.save_interval must be an integer, got 'ten'"),
        ({"train.save_interval": "0"}, "HookParameters.train.save_interval must be a positive"),
        ({"save_steps": "1,x"}, "HookParameters.save_steps must be an integer, got 'x'"),
        ({"start_step": "-3"}, "HookParameters.start_step must not be negative"),
        ({"end_step": "1.5"}, "HookParameters.end_step must be an integer, got '1.5'"),
        ({"save_all": "yes"}, "HookParameters.save_all must be 'true' or 'false', got 'yes'"),
        ({"save_raw_tensor": "1"}, "HookParameters.save_raw_tensor must be 'true' or 'false'"),
        ({"include_workers": "some"}, "include_workers must be 'one' or 'all'"),
        ({"reductions": "median"}, "HookParameters.reductions: invalid value 'median'"),
        ({"include_regex": "a,("}, "invalid regex '('"),
    ],
)
def test_bad_hook_values_name_key_and_value(params: dict[str, str], needle: str) -> None:
    with pytest.raises(HookError) as err:
        HookConfig.from_dict({"HookParameters": params})
    assert needle in str(err.value)


def test_bad_collection_value_names_collection() -> None:
    doc = {"CollectionConfigurations": [{"CollectionName": "weights", "CollectionParameters": {"eval.save_interval": "x"}}]}
    with pytest.raises(HookError, match=r"CollectionConfigurations\[weights\]\.eval\.save_interval"):
        HookConfig.from_dict(doc)


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"HookParameters": "x"},
        {"CollectionConfigurations": {}},
        {"CollectionConfigurations": [{"CollectionParameters": {}}]},
        {"LocalPath": 3},
    ],
)
def test_bad_shapes_are_refused(doc: Any) -> None:
    with pytest.raises(HookError):
        HookConfig.from_dict(doc)


def test_unreadable_or_invalid_file(tmp_path: Path) -> None:
    with pytest.raises(HookError, match="cannot read"):
        HookConfig.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(HookError, match="not valid JSON"):
        HookConfig.load(bad)
