"""The XGBoost training both hooks record (same data, same seed, one thread: identical models).

``train(hook_cls, out_dir, kind)`` builds the hook with every collection and trains; ``kind`` is
``binary`` (one tree per round) or ``multiclass`` (3 classes x 2 parallel trees per round, where
smdebug's tree selection is wrong). Imports only numpy and xgboost.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xgboost as xgb

ALL = ["hyperparameters", "metrics", "losses", "predictions", "labels", "feature_importance",
       "average_shap", "full_shap", "trees"]
ROUNDS = 12


def data(kind: str) -> tuple[xgb.DMatrix, xgb.DMatrix]:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(240, 5)).astype(np.float32)
    if kind == "binary":
        y = (x[:, 0] + 0.5 * x[:, 1] + 0.3 * rng.normal(size=240) > 0).astype(np.float32)
    else:
        y = np.digitize(x[:, 0] + 0.3 * rng.normal(size=240), [-0.5, 0.5]).astype(np.float32)
    return xgb.DMatrix(x[:180], label=y[:180]), xgb.DMatrix(x[180:], label=y[180:])


def params(kind: str) -> dict[str, Any]:
    base: dict[str, Any] = {"max_depth": 3, "eta": 0.3, "nthread": 1, "seed": 0, "subsample": 0.8}
    if kind == "binary":
        return base | {"objective": "binary:logistic", "eval_metric": ["logloss", "auc", "error"]}
    return base | {"objective": "multi:softprob", "num_class": 3, "num_parallel_tree": 2,
                   "eval_metric": ["mlogloss", "merror"]}


def train(hook_cls: Any, save_config: Any, out_dir: str, kind: str) -> None:
    dtrain, dval = data(kind)
    p = params(kind)
    hook = hook_cls(out_dir=out_dir, include_collections=ALL, save_config=save_config,
                    hyperparameters={k: v for k, v in p.items() if not isinstance(v, list)},
                    train_data=dtrain, validation_data=dval)
    xgb.train(p, dtrain, num_boost_round=ROUNDS, evals=[(dtrain, "train"), (dval, "validation")],
              callbacks=[hook], verbose_eval=False)
    if hasattr(hook, "close"):
        hook.close()
