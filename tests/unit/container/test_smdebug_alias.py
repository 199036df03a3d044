"""The training toolkit's ``smdebug`` alias: ``import smdebug.pytorch`` / ``smdebug.tensorflow``
give murphy's hooks when the real smdebug is absent, and the real smdebug when it is installed.
Each case runs in a fresh interpreter with the toolkit's program environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from murphy.container.env import OptMl
from murphy.container.smdebug_alias import ALIAS_DIR, program_env
from murphy.container.toolkit import Toolkit

SERVICE = str(Path(__file__).resolve().parents[3] / "service")


def _run(python: str, code: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([python, "-c", code], env=program_env(env if env is not None else os.environ),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def test_the_alias_goes_last_on_the_path_once() -> None:
    env = program_env({"PYTHONPATH": f"/a{os.pathsep}{ALIAS_DIR}"})
    assert env["PYTHONPATH"].split(os.pathsep) == ["/a", ALIAS_DIR]
    assert program_env({})["PYTHONPATH"] == ALIAS_DIR


def test_without_smdebug_the_alias_maps_to_murphys_hooks() -> None:
    out = _run(sys.executable, (
        "import sys, smdebug, smdebug.pytorch as smd, murphy.hook.torch as mt\n"
        "assert smdebug.__murphy_alias__ and smd.Hook is mt.Hook and smd.modes.TRAIN.name == 'TRAIN'\n"
        "assert smd.SaveConfig(save_interval=2).get_save_config(smd.modes.TRAIN).save_interval == 2\n"
        "assert 'tensorflow' not in sys.modules\n"
        "print(smdebug.__file__)"
    ))
    assert out.strip().startswith(ALIAS_DIR)


def test_murphy_itself_never_makes_smdebug_importable() -> None:
    code = "import importlib.util, murphy.hook, murphy.container.toolkit; assert importlib.util.find_spec('smdebug') is None"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.compat
def test_the_real_smdebug_wins_when_it_is_installed() -> None:
    """In the smdebug 1.0.34 venv, with murphy and the alias on PYTHONPATH ahead of site-packages,
    ``import smdebug`` is still the real package, submodules included."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat"))
    import compat_harness

    python = compat_harness.ensure_smdebug_venv()
    out = _run(python, (
        "import smdebug, smdebug.pytorch, smdebug.core.modes\n"
        "assert not hasattr(smdebug, '__murphy_alias__')\n"
        "print('WHERE', smdebug.__file__, smdebug.pytorch.Hook.__module__)"
    ), env=dict(os.environ, PYTHONPATH=SERVICE))
    line = next(x for x in out.splitlines() if x.startswith("WHERE "))
    _, where, module = line.split()
    assert "site-packages" in where and not where.startswith(ALIAS_DIR), where
    assert module.startswith("smdebug."), module


def test_a_script_mode_program_imports_smdebug_pytorch_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(
        "import os, smdebug.pytorch as smd\n"
        "hook = smd.Hook(out_dir=os.environ['T'], save_config=smd.SaveConfig(save_interval=1))\n"
        "open(os.path.join(os.environ['SM_MODEL_DIR'], 'hook.txt'), 'w').write(type(hook).__module__)\n"
        "hook.close()\n"
    )
    opt_ml = OptMl(str(tmp_path / "c" / "opt" / "ml"))
    for d in opt_ml.layout():
        Path(d).mkdir(parents=True, exist_ok=True)
    hps = {"sagemaker_program": '"train.py"', "sagemaker_submit_directory": json.dumps(src.as_uri())}
    Path(opt_ml.config_file("hyperparameters.json")).write_text(json.dumps(hps))
    Path(opt_ml.config_file("murphy.json")).write_text(json.dumps({"kind": "script-mode"}))
    monkeypatch.setenv("MURPHY_STAGE_FILE", str(tmp_path / "c" / "stage.json"))
    monkeypatch.setenv("SM_MODEL_DIR", opt_ml.model_dir)
    monkeypatch.setenv("T", str(tmp_path / "tensors"))
    assert Toolkit(opt_ml).run() == 0
    assert Path(opt_ml.model_dir, "hook.txt").read_text() == "murphy.hook.torch"
    assert (tmp_path / "tensors" / "training_job_end.ts").exists()
