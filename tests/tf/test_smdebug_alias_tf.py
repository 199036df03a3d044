"""The article's script with its ORIGINAL hook import (``import smdebug.tensorflow as smd``) runs
unchanged through murphy's training toolkit in script mode (as on the process runtime): the
toolkit's smdebug alias maps it to murphy's SessionHook, since the TF venv has no smdebug."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import tf_harness as th

from murphy.container.env import OptMl
from murphy.container.toolkit import Toolkit
from murphy.trial import create_trial

pytestmark = pytest.mark.tf


def test_article_script_with_smdebug_import_runs_through_the_toolkit(
    tf_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    text = th.SEED_SCRIPT.read_text().replace("import murphy.hook.tensorflow as smd\n", "import smdebug.tensorflow as smd\n")
    assert "import smdebug.tensorflow as smd\n" in text
    (src / "script-v2.py").write_text(text)
    tensors = tmp_path / "tensors"
    opt_ml = OptMl(str(tmp_path / "c" / "opt" / "ml"))
    for d in opt_ml.layout():
        Path(d).mkdir(parents=True, exist_ok=True)
    hps = {"lr": "100", "scale": "100000000000", "steps": "10", "debug_frequency": "1",
           "debug_path": json.dumps(str(tensors)),
           "sagemaker_program": '"script-v2.py"', "sagemaker_submit_directory": json.dumps(src.as_uri())}
    Path(opt_ml.config_file("hyperparameters.json")).write_text(json.dumps(hps))
    Path(opt_ml.config_file("murphy.json")).write_text(json.dumps({"kind": "script-mode", "python": tf_python}))
    monkeypatch.setenv("MURPHY_STAGE_FILE", str(tmp_path / "c" / "stage.json"))
    for key, value in th.tf_env().items():
        if key in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL"):
            monkeypatch.setenv(key, value)
    assert Toolkit(opt_ml).run() == 0
    log = capfd.readouterr().out
    assert re.search(r"Step=2, Loss=nan", log), log[-3000:]
    trial = create_trial(str(tensors))
    assert sorted(trial.tensor_names()) == [
        "gradients/multiply/MatMul_1_grad/tuple/control_dependency_1:0", "initialize/weight1:0", "loss/loss:0",
    ]
