"""XGBoost's evaluation metrics as training/validation pairs.

XGBoost saves no modes: every metric is a GLOBAL tensor named ``<eval>-<metric>`` after the
``evals`` list given to ``xgboost.train`` (``train-logloss``, ``validation-logloss``, the
scikit-learn API's ``validation_0-logloss``, ``xgboost.cv``'s ``test-rmse``). A metric is the
*validation* side of a pair when its evaluation set is not ``train`` and ``train-<metric>``
exists; Overfit and Overtraining judge such pairs where a PyTorch run has TRAIN/EVAL modes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

TRAIN = "train"
# Preferred validation sets when several are logged (the first present wins).
PREFERRED = ("validation", "valid", "val", "eval", "test", "validation_0")


def split_metric(name: str) -> tuple[str, str] | None:
    """``(eval set, metric)`` of an XGBoost metric name, None for anything else."""
    eval_set, sep, metric = name.partition("-")
    if not sep or not eval_set or not metric or "/" in eval_set:
        return None
    return eval_set, metric


def validation_pairs(names: Iterable[str]) -> list[tuple[str, str]]:
    """``(train name, validation name)`` for every ``train-<m>`` with a validation sibling."""
    by_metric: dict[str, dict[str, str]] = {}
    for name in names:
        parts = split_metric(name)
        if parts is not None:
            by_metric.setdefault(parts[1], {})[parts[0]] = name
    out: list[tuple[str, str]] = []
    for metric in sorted(by_metric):
        sets = by_metric[metric]
        if TRAIN not in sets:
            continue
        others = [s for s in PREFERRED if s in sets] + sorted(s for s in sets if s not in PREFERRED and s != TRAIN)
        if others:
            out.append((sets[TRAIN], sets[others[0]]))
    return out


def first_value(value: Any) -> float:
    """A metric's value: the first element (``xgboost.cv`` saves ``(mean, std)``)."""
    return float(np.asarray(value, dtype=np.float64).reshape(-1)[0])
