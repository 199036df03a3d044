"""murphy's Python SDK: the SageMaker SDK's Estimator/Debugger API, talking to a murphy server.

    from murphy.sdk import Estimator, Rule, rule_configs

    estimator = Estimator(image_uri="murphy/linear-regression-demo:latest",
                          hyperparameters={"lr": 100, "scale": 1e11, "steps": 10, "debug_frequency": 1},
                          rules=[Rule.sagemaker(rule_configs.exploding_tensor())])
    estimator.fit()   # log, the "Debugger Rule Status" box, then a summary

The server is the ``endpoint`` argument, ``$MURPHY_ENDPOINT``, or an embedded one started in this
process (:mod:`murphy.sdk.embedded`). Everything goes through boto3's SageMaker and CloudWatch
Logs clients, like any other client of the server.
"""

from __future__ import annotations

from murphy.sdk import rule_configs
from murphy.sdk.debugger import CollectionConfig, DebuggerHookConfig, Rule
from murphy.sdk.estimator import Estimator, PyTorch
from murphy.sdk.job import TrainingJob, UnexpectedStatusException
from murphy.sdk.session import Session

__all__ = [
    "CollectionConfig",
    "DebuggerHookConfig",
    "Estimator",
    "PyTorch",
    "Rule",
    "Session",
    "TrainingJob",
    "UnexpectedStatusException",
    "rule_configs",
]
