"""The image catalog: built-in patterns, the script-mode fallback, file overrides and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes.catalog import ImageCatalog, read_catalog_file, resolve_argv

AWS = "763104351884.dkr.ecr.us-west-2.amazonaws.com"


@pytest.mark.parametrize(
    ("image", "kind"),
    [
        (f"{AWS}/pytorch-training:2.1.0-cpu-py310-ubuntu20.04-sagemaker", "script-mode"),
        ("pytorch-training-custom", "script-mode"),
        ("895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest", "rule-evaluator"),
        ("895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rule-evaluator:latest", "rule-evaluator"),
        ("murphy/rule-evaluator:0.1", "rule-evaluator"),
        ("murphy/linear-regression-demo:latest", "command"),
        ("registry.local:5000/murphy/linear-regression-demo:v2", "command"),
    ],
)
def test_builtin_patterns(image: str, kind: str) -> None:
    assert ImageCatalog().resolve(image).kind == kind


def test_sdk3_rule_image_placeholder_is_the_builtin_rule_evaluator() -> None:
    """``Rule.sagemaker()`` of SDK 3.x sends ``DEFAULT_RULE_EVALUATOR_IMAGE``: the same evaluator
    (and Docker image) as AWS's built-in rule image, never an unknown image."""
    placeholder = ImageCatalog().resolve("DEFAULT_RULE_EVALUATOR_IMAGE")
    aws = ImageCatalog().resolve("895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest")
    assert (placeholder.kind, placeholder.docker_image) == (aws.kind, aws.docker_image) == (
        "rule-evaluator", "murphy/rule-evaluator:latest")


def test_demo_runs_the_packaged_script_with_the_services_python() -> None:
    entry = ImageCatalog().resolve("murphy/linear-regression-demo:latest")
    assert entry.command == ("python", "-m", "murphy.demos.linear_regression")
    assert resolve_argv(entry.command, "/venv/bin/python")[0] == "/venv/bin/python"
    assert resolve_argv(["/bin/sh", "x"], "/venv/bin/python") == ["/bin/sh", "x"]


def test_unknown_image_names_the_image_and_the_fix() -> None:
    with pytest.raises(RuntimeBackendError) as err:
        ImageCatalog().resolve("acme/trainer:1")
    text = str(err.value)
    assert "'acme/trainer:1'" in text and "MURPHY_IMAGE_CATALOG" in text and "docs/runtimes.md" in text


def test_any_image_with_sagemaker_program_falls_back_to_script_mode() -> None:
    entry = ImageCatalog().resolve("acme/trainer:1", {"sagemaker_program": '"train.py"'})
    assert entry.kind == "script-mode"
    # A pattern that matches still wins over the fallback.
    assert ImageCatalog().resolve("murphy/rule-evaluator:1", {"sagemaker_program": "x"}).kind == "rule-evaluator"


def test_file_entries_come_first_and_first_match_wins(tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"images": [
        {"pattern": "murphy/linear-regression-demo:*", "kind": "command", "command": ["python", "my_demo.py"]},
        {"pattern": "acme/*", "kind": "script-mode"},
        {"pattern": "acme/trainer:*", "kind": "command", "command": ["never"]},
    ]}))
    catalog = ImageCatalog.load(path)
    assert catalog.resolve("murphy/linear-regression-demo:latest").command == ("python", "my_demo.py")
    assert catalog.resolve("acme/trainer:1").kind == "script-mode"
    # Built-ins still follow the file's entries.
    assert catalog.resolve("murphy/rule-evaluator:1").kind == "rule-evaluator"
    assert ImageCatalog.load(None).entries == ImageCatalog().entries


def test_a_bare_list_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"pattern": "x:*", "kind": "rule-evaluator", "description": "mine"}]))
    [entry] = read_catalog_file(path)
    assert (entry.pattern, entry.kind, entry.description) == ("x:*", "rule-evaluator", "mine")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"images": [{"pattern": "x", "kind": "docker"}]}, "kind must be one of"),
        ({"images": [{"pattern": "x", "kind": "command"}]}, "command must be a non-empty list"),
        ({"images": [{"pattern": "x", "kind": "script-mode", "command": ["a"]}]}, "only allowed for kind 'command'"),
        ({"images": [{"pattern": "", "kind": "script-mode"}]}, "pattern must be a non-empty string"),
        ({"images": [{"pattern": "x", "kind": "script-mode", "cmd": []}]}, "unknown key(s) ['cmd']"),
        ({"image": []}, "unknown top-level key(s) ['image']"),
        ({"images": {"pattern": "x"}}, "must be a list"),
    ],
)
def test_bad_files_are_rejected_with_the_entry_named(tmp_path: Path, doc: object, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(RuntimeBackendError) as err:
        ImageCatalog.load(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_unreadable_or_invalid_json(tmp_path: Path) -> None:
    with pytest.raises(RuntimeBackendError, match="cannot read image catalog"):
        ImageCatalog.load(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{nope")
    with pytest.raises(RuntimeBackendError, match="not valid JSON"):
        ImageCatalog.load(tmp_path / "x.json")


@pytest.mark.parametrize(
    ("image", "docker_image"),
    [
        ("763104351884.dkr.ecr.us-west-2.amazonaws.com/tensorflow-training:2.16.2-cpu-py310-ubuntu20.04-sagemaker",
         "murphy/tensorflow-cpu:latest"),
        ("763104351884.dkr.ecr.us-west-2.amazonaws.com/tensorflow-training:2.16.2-gpu-py310-cu123-ubuntu20.04-sagemaker",
         "murphy/tensorflow-gpu:latest"),
        ("murphy/tensorflow-cpu:latest", ""),
        ("murphy/tensorflow-gpu:latest", ""),
    ],
)
def test_aws_tensorflow_training_images_map_to_murphys(image: str, docker_image: str) -> None:
    entry = ImageCatalog().resolve(image)
    assert (entry.kind, entry.docker_image) == ("script-mode", docker_image)


def test_a_file_entry_may_name_the_programs_interpreter(tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"images": [
        {"pattern": "*tensorflow-training*", "kind": "script-mode", "python": "/srv/tf/bin/python"}]}))
    [entry] = read_catalog_file(path)
    assert (entry.kind, entry.python) == ("script-mode", "/srv/tf/bin/python")
    for bad in ({"pattern": "x", "kind": "script-mode", "python": "bin/python"},
                {"pattern": "x", "kind": "rule-evaluator", "python": "/srv/tf/bin/python"}):
        path.write_text(json.dumps([bad]))
        with pytest.raises(RuntimeBackendError, match="python"):
            read_catalog_file(path)
