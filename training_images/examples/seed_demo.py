"""`make demo`: the seed article's story, end to end, on this machine.

1. Train the article's 2-D linear regression (image ``murphy/linear-regression-demo:latest``, the
   PyTorch port in ``murphy.demos.linear_regression``; it applies Adam the way TensorFlow 1 did,
   which is what turns the article's overflow into NaN, as its docstring explains) with the bad
   hyperparameters and ``rules=[Rule.sagemaker(rule_configs.exploding_tensor())]``. The loss
   reaches ~1e24, then NaN; ExplodingTensor goes InProgress -> IssuesFound and murphy stops the job.
2. Open the saved tensors like the article (``create_trial(latest_job_debugger_artifacts_path())``),
   list them and print the gradient at every step (~1e23, then nan).
3. Print murphy's diagnosis: where the rule fired, and the hyperparameters that look responsible.
4. Rerun with sane hyperparameters: NoIssuesFound, Completed.

No server to start: ``murphy.sdk`` runs an embedded murphy service in this process (data under
``./.murphy`` or ``$MURPHY_DATA_DIR``) and talks to it through boto3, as it would to a remote one.
"""

from __future__ import annotations

import time

import numpy as np

from murphy.sdk import Estimator, Rule, rule_configs
from murphy.sdk.diagnosis import diagnose
from murphy.trial import create_trial

IMAGE = "murphy/linear-regression-demo:latest"
BAD_HYPERPARAMETERS = {"lr": 100, "scale": 1e11, "steps": 10, "debug_frequency": 1}
GOOD_HYPERPARAMETERS = {"lr": 0.001, "scale": 1, "steps": 10, "debug_frequency": 1}


def banner(text: str) -> None:
    print(f"\n{'=' * 78}\n{text}\n{'=' * 78}", flush=True)


def train(hyperparameters: dict[str, float]) -> Estimator:
    estimator = Estimator(
        image_uri=IMAGE,
        base_job_name="debugger-simple-demo",
        hyperparameters=hyperparameters,
        rules=[Rule.sagemaker(rule_configs.exploding_tensor())],
    )
    estimator.fit()
    return estimator


def main() -> None:
    started = time.monotonic()
    banner(f"1. Training with the article's bad hyperparameters {BAD_HYPERPARAMETERS}")
    estimator = train(BAD_HYPERPARAMETERS)
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

    banner(f"4. Training again with sane hyperparameters {GOOD_HYPERPARAMETERS}")
    healthy = train(GOOD_HYPERPARAMETERS)
    assert healthy.latest_training_job is not None
    summary = healthy.latest_training_job.rule_job_summary()
    print("\n" + "\n".join(f"{r['RuleConfigurationName']}: {r['RuleEvaluationStatus']}" for r in summary))
    print(f"\ndemo finished in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
