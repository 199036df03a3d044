"""SageMaker's built-in XGBoost algorithm (``sagemaker-xgboost:<version>``), algorithm mode:
``python -m murphy.algorithms.xgboost`` reads the ``/opt/ml`` contract, trains with xgboost and
saves tensors through ``murphy.hook.xgboost`` when the job has a DebugHookConfig.
See ``docs/xgboost.md``."""
