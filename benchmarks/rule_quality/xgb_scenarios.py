"""The XGBoost fault types: real ``xgboost.train`` runs recorded by murphy's XGBoost hook, each with
a healthy twin (same data generator, sane settings).

Every run saves what the XGBoost rules read, every boosting round: metrics/losses (train and
validation), feature importance, the round's trees, validation labels and predictions. The healthy
twins are strong, still-improving models (validation accuracy well above 90 %, validation loss
still falling at the end) so that any rule firing on them is a false alarm.

Also imported by tests/integration/test_xgboost_rules.py, which runs one seed of each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import xgboost as xgb

from murphy.core.save_config import SaveConfig
from murphy.hook.xgboost import Hook

COLLECTIONS = ["metrics", "losses", "feature_importance", "trees", "predictions", "labels"]


@dataclass
class XgbLog:
    """What the run observed (the fields run.py reads from a RunLog)."""

    first_nonfinite: int | None = None
    val_losses: list[tuple[int, float]] | None = None
    train_losses: list[float] | None = None
    global_steps: int = 0


def _signal(rng: np.random.Generator, n: int, features: int) -> tuple[np.ndarray, np.ndarray]:
    """Binary labels ``z > 0`` and ``features`` noisy copies ``z + N(0, 0.3)`` of the latent
    ``z``: every feature is about as informative (importance spreads over all of them) and even
    the first depth-4 tree classifies 94-96 % of the held-out rows right in each class."""
    z = rng.normal(size=n)
    x = (z[:, None] + 0.3 * rng.normal(size=(n, features))).astype(np.float32)
    return x, (z > 0).astype(np.float32)


def _train(out: str, params: dict[str, Any], x: np.ndarray, y: np.ndarray, xv: np.ndarray, yv: np.ndarray,
           rounds: int) -> XgbLog:
    dtrain, dval = xgb.DMatrix(x, label=y), xgb.DMatrix(xv, label=yv)
    hook = Hook(out_dir=out, include_collections=COLLECTIONS, save_config=SaveConfig(save_interval=1),
                validation_data=dval)
    history: dict[str, Any] = {}
    xgb.train({"nthread": 1, "seed": 0, "eval_metric": "logloss", **params}, dtrain, num_boost_round=rounds,
              evals=[(dtrain, "train"), (dval, "validation")], evals_result=history, callbacks=[hook],
              verbose_eval=False)
    val = history["validation"]["logloss"]
    return XgbLog(val_losses=list(enumerate(val)), train_losses=list(history["train"]["logloss"]),
                  global_steps=rounds)


HEALTHY = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.1, "min_child_weight": 1}


def leaky_feature(faulty: bool, seed: int, out: str) -> XgbLog:
    """A column that leaks the label (the label plus N(0, 0.1)) next to the 10 real features:
    from round ~5 on the trees split on it more than on all the others together."""
    rng = np.random.default_rng(seed)
    x, y = _signal(rng, 3000, 10)
    if faulty:
        x = np.column_stack([x, y + 0.1 * rng.normal(size=len(y))]).astype(np.float32)
    return _train(out, HEALTHY, x[:2400], y[:2400], x[2400:], y[2400:], 30)


def shallow_trees(faulty: bool, seed: int, out: str) -> XgbLog:
    """Over-regularised splits (gamma 40: a split must gain 40) stop every tree at depth <= 2."""
    rng = np.random.default_rng(seed)
    x, y = _signal(rng, 3000, 10)
    params = HEALTHY | ({"gamma": 40.0, "max_depth": 6} if faulty else {"max_depth": 6})
    return _train(out, params, x[:2400], y[:2400], x[2400:], y[2400:], 30)


def frozen_booster(faulty: bool, seed: int, out: str) -> XgbLog:
    """eta 0: every tree is scaled to nothing, the loss never moves."""
    rng = np.random.default_rng(seed)
    x, y = _signal(rng, 3000, 10)
    return _train(out, HEALTHY | {"eta": 0.0 if faulty else 0.1}, x[:2400], y[:2400], x[2400:], y[2400:], 30)


def memorising(faulty: bool, seed: int, out: str) -> XgbLog:
    """80 training rows with noisy labels, deep trees, eta 0.5 (healthy: 2400 rows, the usual
    settings): the training loss goes to 0 while the validation loss turns and rises."""
    rng = np.random.default_rng(seed)
    x, y = _signal(rng, 3000, 10)
    if faulty:
        flip = rng.random(80) < 0.25
        ytr = np.where(flip, 1 - y[:80], y[:80]).astype(np.float32)
        params = HEALTHY | {"max_depth": 10, "eta": 0.5, "min_child_weight": 0, "lambda": 0}
        return _train(out, params, x[:80], ytr, x[2400:], y[2400:], 30)
    return _train(out, HEALTHY, x[:2400], y[:2400], x[2400:], y[2400:], 30)


def imbalanced_labels(faulty: bool, seed: int, out: str) -> XgbLog:
    """A 99:1 label split (healthy: about 50:50)."""
    rng = np.random.default_rng(seed)
    x, y = _signal(rng, 3000, 10)
    if faulty:
        z = x.mean(axis=1)
        y = (z > np.quantile(z, 0.99)).astype(np.float32)
    return _train(out, HEALTHY, x[:2400], y[:2400], x[2400:], y[2400:], 30)


def noise_labels(faulty: bool, seed: int, out: str) -> XgbLog:
    """Labels that do not depend on the features: predictions are no better than chance."""
    rng = np.random.default_rng(seed)
    x, y = _signal(rng, 3000, 10)
    if faulty:
        y = (rng.random(len(y)) < 0.5).astype(np.float32)
    return _train(out, HEALTHY, x[:2400], y[:2400], x[2400:], y[2400:], 30)


def at_start(_: Any) -> int | None:
    return 0


def val_minimum(log: Any) -> int | None:
    return min(log.val_losses, key=lambda sv: sv[1])[0] if log.val_losses else None
