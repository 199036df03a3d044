"""The image catalog: which local program stands in for a container image.

The process runtime has no images to pull, so every image URI a job names is looked up here:
an ordered list of ``fnmatch`` patterns (first match wins) to one of three kinds of entry:

* ``script-mode``: SageMaker's training toolkit behaviour (``sagemaker_program`` +
  ``sagemaker_submit_directory`` hyperparameters), run by ``python -m murphy.container``;
* ``command``: a fixed argv, with the user's hyperparameters appended as ``--key value``;
* ``rule-evaluator``: murphy's rule container, ``python -m murphy.rules``.

An argv whose first word is ``python`` runs with the service's own interpreter. Entries from
the JSON file named by ``Settings.image_catalog`` come before the built-ins; its format is in
``docs/runtimes.md``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from murphy.exceptions import RuntimeBackendError

Kind = Literal["script-mode", "command", "rule-evaluator"]
KINDS: tuple[Kind, ...] = ("script-mode", "command", "rule-evaluator")

#: The argv word that means "the interpreter the runtime was given".
PYTHON = "python"
_PROGRAM_HP = "sagemaker_program"


@dataclass(frozen=True)
class CatalogEntry:
    pattern: str
    kind: Kind
    #: The program of a ``command`` entry (empty for the other kinds).
    command: tuple[str, ...] = ()
    description: str = ""
    #: The local image the Docker runtime runs for it ("" = the image URI itself).
    docker_image: str = ""
    #: A ``command`` image that runs script mode instead when the job names a
    #: ``sagemaker_program`` (SageMaker's framework images with a built-in algorithm: XGBoost).
    script_mode_with_program: bool = False
    #: The process runtime's interpreter for the program of a script-mode or command entry
    #: ("" = the service's own): e.g. a venv with TensorFlow, which the service's venv lacks.
    python: str = ""

    def matches(self, image: str) -> bool:
        return fnmatch.fnmatchcase(image, self.pattern)


_DEMO = (PYTHON, "-m", "murphy.demos.linear_regression")
DEMO_IMAGE = "murphy/linear-regression-demo:latest"
RULE_IMAGE = "murphy/rule-evaluator:latest"
CPU_IMAGE = "murphy/pytorch-cpu:latest"
GPU_IMAGE = "murphy/pytorch-gpu:latest"
XGBOOST_IMAGE = "murphy/xgboost:latest"
_XGBOOST = (PYTHON, "-m", "murphy.algorithms.xgboost")
_XGB = "SageMaker's XGBoost algorithm (script mode with sagemaker_program)"
TF_CPU_IMAGE = "murphy/tensorflow-cpu:latest"
TF_GPU_IMAGE = "murphy/tensorflow-gpu:latest"
_SEED = "the seed's linear regression"
#: What SDK 3.x's ``sagemaker.core.debugger.Rule.sagemaker()`` leaves in ``image_uri`` (2.x looked
#: the regional image up instead). Only built-in rules are made that way (``Rule.custom`` needs an
#: image), so it means murphy's built-in rule evaluator, exactly as the AWS rule image does.
DEFAULT_RULE_PLACEHOLDER = "DEFAULT_RULE_EVALUATOR_IMAGE"

BUILTIN_ENTRIES: tuple[CatalogEntry, ...] = (
    CatalogEntry(DEMO_IMAGE, "command", _DEMO, _SEED, DEMO_IMAGE),
    CatalogEntry("murphy/linear-regression-demo", "command", _DEMO, _SEED, DEMO_IMAGE),
    CatalogEntry("*/murphy/linear-regression-demo:*", "command", _DEMO, _SEED, DEMO_IMAGE),
    CatalogEntry("*/sagemaker-debugger-rules:*", "rule-evaluator", (), "AWS built-in rules", RULE_IMAGE),
    CatalogEntry("*/sagemaker-debugger-rule-evaluator:*", "rule-evaluator", (), "AWS custom rules", RULE_IMAGE),
    CatalogEntry("murphy/rule-evaluator:*", "rule-evaluator", (), "murphy's rule evaluator"),
    CatalogEntry(DEFAULT_RULE_PLACEHOLDER, "rule-evaluator", (), "SDK 3.x Rule.sagemaker()'s placeholder: built-in rules",
                 RULE_IMAGE),
    CatalogEntry("murphy/pytorch-cpu:*", "script-mode", (), "murphy's PyTorch CPU image"),
    CatalogEntry("murphy/pytorch-gpu:*", "script-mode", (), "murphy's PyTorch GPU image"),
    # AWS tags name the device: pytorch-training:2.1.0-gpu-py310-cu121-ubuntu20.04-sagemaker.
    CatalogEntry("*pytorch-training:*-gpu-*", "script-mode", (), "AWS PyTorch GPU training images", GPU_IMAGE),
    CatalogEntry("*/pytorch-training:*", "script-mode", (), "AWS PyTorch training images", CPU_IMAGE),
    CatalogEntry("*pytorch-training*", "script-mode", (), "AWS PyTorch training images", CPU_IMAGE),
    # sagemaker.image_uris.retrieve("xgboost", region, "1.7-1"):
    # <account>.dkr.ecr.<region>.amazonaws.com/sagemaker-xgboost:1.7-1
    CatalogEntry("*/sagemaker-xgboost:*", "command", _XGBOOST, _XGB, XGBOOST_IMAGE, script_mode_with_program=True),
    CatalogEntry("sagemaker-xgboost:*", "command", _XGBOOST, _XGB, XGBOOST_IMAGE, script_mode_with_program=True),
    CatalogEntry("murphy/xgboost:*", "command", _XGBOOST, "murphy's XGBoost image", script_mode_with_program=True),
    CatalogEntry("murphy/tensorflow-cpu:*", "script-mode", (), "murphy's TensorFlow CPU image"),
    CatalogEntry("murphy/tensorflow-gpu:*", "script-mode", (), "murphy's TensorFlow GPU image"),
    # tensorflow-training:2.16.2-gpu-py310-cu123-ubuntu20.04-sagemaker (and -cpu-py310-...).
    CatalogEntry("*tensorflow-training:*-gpu-*", "script-mode", (), "AWS TensorFlow GPU training images", TF_GPU_IMAGE),
    CatalogEntry("*/tensorflow-training:*", "script-mode", (), "AWS TensorFlow training images", TF_CPU_IMAGE),
    CatalogEntry("*tensorflow-training*", "script-mode", (), "AWS TensorFlow training images", TF_CPU_IMAGE),
)


class ImageCatalog:
    """Ordered ``pattern → entry`` list; :meth:`resolve` returns the first match."""

    def __init__(self, entries: Iterable[CatalogEntry] = BUILTIN_ENTRIES) -> None:
        self.entries: tuple[CatalogEntry, ...] = tuple(entries)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> ImageCatalog:
        """The built-ins, preceded by the entries of the JSON file at ``path`` (if given)."""
        if path is None:
            return cls()
        return cls((*read_catalog_file(path), *BUILTIN_ENTRIES))

    def resolve(self, image: str, hyperparameters: Mapping[str, str] | None = None) -> CatalogEntry:
        """The entry for ``image``; script mode when nothing matches but ``sagemaker_program``
        is a hyperparameter. Raises :class:`RuntimeBackendError` for an unknown image."""
        for entry in self.entries:
            if entry.matches(image):
                if entry.script_mode_with_program and hyperparameters and _PROGRAM_HP in hyperparameters:
                    return dataclasses.replace(entry, kind="script-mode", command=())
                return entry
        if hyperparameters and _PROGRAM_HP in hyperparameters:
            return CatalogEntry(image, "script-mode", (), "script mode (sagemaker_program)")
        raise RuntimeBackendError(
            f"image {image!r} is not in murphy's image catalog, so the process runtime does not know "
            "what to run for it. Add an entry to the JSON file named by MURPHY_IMAGE_CATALOG, e.g. "
            f'{{"images": [{{"pattern": "{image}", "kind": "command", "command": ["python", "train.py"]}}]}} '
            "(kinds: script-mode, command, rule-evaluator; see docs/runtimes.md), or use script mode "
            "(sagemaker_program and sagemaker_submit_directory hyperparameters)."
        )


def read_catalog_file(path: str | os.PathLike[str]) -> list[CatalogEntry]:
    """Parse a catalog file: ``{"images": [entry, ...]}`` or a bare list of entries."""
    where = str(path)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise RuntimeBackendError(f"cannot read image catalog {where}: {e}") from e
    except ValueError as e:
        raise RuntimeBackendError(f"image catalog {where} is not valid JSON: {e}") from e
    if isinstance(doc, Mapping):
        unknown = sorted(set(doc) - {"images"})
        if unknown:
            raise RuntimeBackendError(f"image catalog {where}: unknown top-level key(s) {unknown} (expected 'images')")
        doc = doc.get("images", [])
    if not isinstance(doc, list):
        raise RuntimeBackendError(f"image catalog {where}: 'images' must be a list of entries")
    return [_entry(raw, f"{where}: images[{i}]") for i, raw in enumerate(doc)]


def _entry(raw: Any, where: str) -> CatalogEntry:
    if not isinstance(raw, Mapping):
        raise RuntimeBackendError(f"{where} must be an object with 'pattern' and 'kind'")
    unknown = sorted(set(raw) - {"pattern", "kind", "command", "description", "docker_image", "python"})
    if unknown:
        raise RuntimeBackendError(
            f"{where}: unknown key(s) {unknown} (allowed: pattern, kind, command, description, docker_image, python)")
    pattern, kind, command = raw.get("pattern"), raw.get("kind"), raw.get("command")
    if not isinstance(pattern, str) or not pattern:
        raise RuntimeBackendError(f"{where}.pattern must be a non-empty string, got {pattern!r}")
    if kind not in KINDS:
        raise RuntimeBackendError(f"{where}.kind must be one of {', '.join(KINDS)}; got {kind!r}")
    if kind == "command":
        if not isinstance(command, list) or not command or not all(isinstance(a, str) and a for a in command):
            raise RuntimeBackendError(f"{where}.command must be a non-empty list of strings for kind 'command'")
    elif command is not None:
        raise RuntimeBackendError(f"{where}.command is only allowed for kind 'command' (this entry is {kind!r})")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise RuntimeBackendError(f"{where}.description must be a string")
    docker_image = raw.get("docker_image", "")
    if not isinstance(docker_image, str):
        raise RuntimeBackendError(f"{where}.docker_image must be a string (a local Docker image)")
    python = raw.get("python", "")
    if not isinstance(python, str) or (python and not os.path.isabs(python)):
        raise RuntimeBackendError(f"{where}.python must be an absolute path to an interpreter, got {python!r}")
    if python and kind == "rule-evaluator":
        raise RuntimeBackendError(f"{where}.python is only allowed for kinds 'script-mode' and 'command'")
    return CatalogEntry(pattern, kind, tuple(command or ()), description, docker_image, python=python)


def resolve_argv(argv: Iterable[str], python: str) -> list[str]:
    """``argv`` with a leading ``python`` replaced by the runtime's interpreter."""
    out = list(argv)
    if out and out[0] == PYTHON:
        out[0] = python
    return out
