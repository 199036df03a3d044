"""`make demo-tf`: the seed article's story told with its own TensorFlow script, end to end.

1. Train the article's ``script-v2.py`` (its TF1 code with ``import smdebug.tensorflow as smd``,
   run unchanged through the toolkit's smdebug alias) in ``murphy/tensorflow-cpu`` with the bad
   hyperparameters and ``rules=[Rule.sagemaker(rule_configs.exploding_tensor())]``: Loss=nan from
   step 2, ExplodingTensor IssuesFound, the job Stopped.
2. Open the saved tensors like the article: ``loss/loss:0``, ``initialize/weight1:0`` and
   ``gradients/multiply/MatMul_1_grad/tuple/control_dependency_1:0`` (~1e23, then nan).
3. Print murphy's diagnosis.

TensorFlow is not in murphy's venv, so the job runs on the Docker runtime (the Makefile sets
``MURPHY_RUNTIME=docker`` and builds the images); the embedded service needs no server.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from murphy.sdk import Estimator, Rule, rule_configs
from murphy.sdk.diagnosis import diagnose
from murphy.trial import create_trial

IMAGE = "murphy/tensorflow-cpu:latest"
SCRIPT = Path(__file__).resolve().parent / "script-v2.py"
BAD_HYPERPARAMETERS = {"steps": 10, "lr": 100, "scale": 100000000000, "debug_frequency": 1}


def banner(text: str) -> None:
    print(f"\n{'=' * 78}\n{text}\n{'=' * 78}", flush=True)


def main() -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as source:
        # The article's own hook import: the toolkit maps smdebug.tensorflow to murphy's hook.
        text = SCRIPT.read_text().replace("import murphy.hook.tensorflow as smd\n", "import smdebug.tensorflow as smd\n")
        (Path(source) / "script-v2.py").write_text(text)
        banner(f"1. Training the article's TensorFlow script with its bad hyperparameters {BAD_HYPERPARAMETERS}")
        estimator = Estimator(
            image_uri=IMAGE,
            entry_point="script-v2.py",
            source_dir=source,
            base_job_name="debugger-simple-demo",
            hyperparameters=BAD_HYPERPARAMETERS,
            rules=[Rule.sagemaker(rule_configs.exploding_tensor())],
        )
        estimator.fit()
    assert estimator.latest_training_job is not None
    description = estimator.latest_training_job.describe()
    rule = description["DebugRuleEvaluationStatuses"][0]
    print(f"\n{rule['RuleConfigurationName']}\n{rule['RuleEvaluationStatus']}")

    banner("2. The saved tensors (create_trial(estimator.latest_job_debugger_artifacts_path()))")
    path = estimator.latest_job_debugger_artifacts_path()
    assert path is not None
    trial = create_trial(path)
    print(f"trial: {path}")
    print(f"tensors: {trial.tensor_names()}")
    for name in trial.tensor_names(collection="gradients"):
        print(f"\n{name}")
        for step in trial.tensor(name).steps():
            value = np.asarray(trial.tensor(name).value(step))
            print(f"  step {step}  Value: ", np.array2string(value, precision=7).replace("\n", ""))

    banner("3. Diagnosis")
    for line in diagnose(description, trial).lines():
        print(line)
    print(f"\ndemo finished in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
