"""The built-in XGBoost algorithm's training run (algorithm mode).

Reads SageMaker's ``/opt/ml`` contract (``$MURPHY_OPT_ML`` under the process runtime):
``input/config/hyperparameters.json`` (checked by :mod:`.hyperparameters`),
``inputdataconfig.json`` (each channel's ``ContentType``: ``text/csv`` = label in the first
column, no header; ``text/libsvm``, the default), the ``train`` channel (required) and the
``validation`` channel (optional) under ``input/data/`` (File mode) or, in Pipe mode, their
first epoch's FIFO ``input/data/<channel>_0`` (CSV or libsvm, as SageMaker's algorithm reads
them). Trains with ``xgboost.train`` on
``[(train, "train"), (validation, "validation")]``, printing each round as xgboost (and so
SageMaker's algorithm) does: ``[0]\\ttrain-rmse:0.47990\\tvalidation-rmse:0.48812``, the tab
shown as ``#011`` in CloudWatch. The model goes to ``model/xgboost-model`` (xgboost's own
format). With ``debughookconfig.json`` (a DebugHookConfig) tensors are saved by
``murphy.hook.xgboost`` with the configured collections, the hyperparameters, the training data
(SHAP) and the validation data (predictions, labels).

A bad setting ends the job with ``ClientError: <SageMaker's message>`` in ``output/failure``
(the job's FailureReason) and exit code 1; anything else with ``AlgorithmError: ...``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import xgboost

from murphy.algorithms.xgboost.hyperparameters import UserError, validate
from murphy.container.env import OPT_ML_ENV, OptMl
from murphy.hook.config import CONFIG_FILE_PATH_ENV
from murphy.hook.xgboost import Hook
from murphy.hook.xgboost_data import (
    CSV,
    DataError,
    content_type,
    data_files,
    load_csv,
    load_dmatrix,
)

MODEL_FILE = "xgboost-model"
TRAIN, VALIDATION = "train", "validation"
# Ours, not xgboost's: they steer the run around xgboost.train.
_RUN_KEYS = ("num_round", "early_stopping_rounds", "csv_weights", "save_model_on_termination")


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def _channel(opt_ml: OptMl, data_config: dict[str, Any], name: str, weights: bool) -> xgboost.DMatrix | None:
    path = opt_ml.channel_dir(name)
    if name not in data_config and not os.path.isdir(path):
        return None
    config = data_config.get(name) or {}
    ctype = config.get("ContentType")
    scratch = None
    try:
        if config.get("TrainingInputMode") == "Pipe":
            scratch = tempfile.mkdtemp(prefix=f"murphy-xgboost-{name}-")
            path = _drain_pipe(path, config, scratch)
        if weights and content_type(ctype) == CSV:
            x, y = load_csv(data_files(path))
            return xgboost.DMatrix(x[:, 1:], label=y, weight=x[:, 0])
        return load_dmatrix(path, ctype)
    except DataError as e:
        raise UserError(f"Channel '{name}': {e}") from e
    finally:
        if scratch is not None:  # the DMatrix holds the data in memory by now
            shutil.rmtree(scratch, ignore_errors=True)


def _drain_pipe(channel_dir: str, config: dict[str, Any], scratch: str) -> str:
    """The first epoch of a Pipe-mode channel, read to its end into one scratch file.

    xgboost's loaders need a file (libsvm) or a whole array (CSV), and the algorithm makes one
    pass over its data, so one epoch is all it reads, as SageMaker's algorithm does for CSV and
    libsvm in Pipe mode. RecordIO framing wraps protobuf records, which murphy's algorithm does
    not read."""
    if config.get("RecordWrapperType") == "RecordIO":
        raise DataError("RecordIO-wrapped data (application/x-recordio-protobuf) is not supported in Pipe mode; "
                        "use text/csv or text/libsvm with RecordWrapperType None")
    fifo = f"{channel_dir}_0"
    if not os.path.exists(fifo):
        raise DataError(f"{fifo} is not a valid path!")
    out = os.path.join(scratch, "pipe-epoch-0")
    with open(fifo, "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return out


def xgboost_params(hps: dict[str, Any]) -> dict[str, Any]:
    """The ``params`` of ``xgboost.train`` from validated hyperparameters."""
    params = {k: v for k, v in hps.items() if k not in _RUN_KEYS}
    if "eval_metric" in params:
        params["eval_metric"] = list(params["eval_metric"])
    return params


def make_hook(opt_ml: OptMl, hps: dict[str, Any], dtrain: Any, dval: Any) -> Hook | None:
    """murphy's hook from the job's DebugHookConfig (None without one)."""
    path = os.environ.get(CONFIG_FILE_PATH_ENV) or opt_ml.config_file("debughookconfig.json")
    if not os.path.exists(path):
        return None
    return Hook.create_from_json_file(path, hyperparameters=hps, train_data=dtrain, validation_data=dval)


def train(opt_ml: OptMl) -> xgboost.Booster:
    """Train one job from its ``/opt/ml`` files; the model is saved under ``model/``."""
    hps = validate(_read_json(opt_ml.config_file("hyperparameters.json")))
    data_config = _read_json(opt_ml.config_file("inputdataconfig.json"))
    weights = hps.get("csv_weights") == 1
    dtrain = _channel(opt_ml, data_config, TRAIN, weights)
    if dtrain is None:
        raise UserError("Channel 'train' is required.")
    dval = _channel(opt_ml, data_config, VALIDATION, weights)
    if dval is not None and dval.num_col() != dtrain.num_col():
        raise UserError(
            f"Feature size of train data ({dtrain.num_col()}) does not match the validation data ({dval.num_col()})."
        )
    _check_labels(dtrain, hps)
    evals = [(dtrain, TRAIN)] + ([(dval, VALIDATION)] if dval is not None else [])
    callbacks: list[xgboost.callback.TrainingCallback] = []
    hook = make_hook(opt_ml, hps, dtrain, dval)
    if hook is not None:
        callbacks.append(hook)
    if "early_stopping_rounds" in hps and dval is not None:
        callbacks.append(xgboost.callback.EarlyStopping(rounds=hps["early_stopping_rounds"], save_best=False))
    try:
        booster = xgboost.train(xgboost_params(hps), dtrain, num_boost_round=hps["num_round"], evals=evals,
                                callbacks=callbacks, verbose_eval=True)
    except xgboost.core.XGBoostError as e:
        # xgboost refuses combinations the checks above cannot see (labels outside num_class ...).
        raise UserError(f"XGBoost rejected the job: {str(e).splitlines()[0]}") from e
    finally:
        if hook is not None:
            hook.close()
    os.makedirs(opt_ml.model_dir, exist_ok=True)
    # xgboost's UBJSON format under SageMaker's file name (a name without .json/.ubj).
    raw = booster.save_raw(raw_format="ubj")
    Path(opt_ml.model_dir, MODEL_FILE).write_bytes(bytes(raw))
    return booster


def _check_labels(dtrain: xgboost.DMatrix, hps: dict[str, Any]) -> None:
    labels = dtrain.get_label()
    if labels.size == 0:
        raise UserError("Got input data without labels. Please check the input data set.")
    objective = hps["objective"]
    if objective.startswith("binary:") and not np.isin(labels, (0.0, 1.0)).all():
        raise UserError(f"Objective '{objective}' needs labels 0 or 1 in the first column of the train data.")
    if objective.startswith("multi:"):
        k = hps["num_class"]
        if labels.min() < 0 or labels.max() >= k or not np.equal(np.mod(labels, 1), 0).all():
            raise UserError(f"Labels must be integers in [0, {k}) for num_class {k}.")


def _fail(opt_ml: OptMl, message: str) -> int:
    print(message, file=sys.stderr, flush=True)
    try:
        os.makedirs(os.path.dirname(opt_ml.failure_file), exist_ok=True)
        Path(opt_ml.failure_file).write_text(message, encoding="utf-8")
    except OSError as e:
        print(f"cannot write {opt_ml.failure_file}: {e}", file=sys.stderr)
    return 1


def main() -> int:
    opt_ml = OptMl(os.environ.get(OPT_ML_ENV) or "/opt/ml")
    try:
        train(opt_ml)
    except UserError as e:
        return _fail(opt_ml, f"ClientError: {e}")
    except Exception as e:
        return _fail(opt_ml, f"AlgorithmError: {type(e).__name__}: {e}")
    print(f"model saved to {os.path.join(opt_ml.model_dir, MODEL_FILE)}", flush=True)
    return 0
