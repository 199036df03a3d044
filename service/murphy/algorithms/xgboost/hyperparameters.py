"""The built-in XGBoost algorithm's hyperparameters: SageMaker's names, types, ranges, defaults
and validation messages (``sagemaker-xgboost-container``'s algorithm mode), without xgboost.

:func:`validate` turns the job's string map into typed values or raises :class:`UserError`
with SageMaker's wording (``Missing required hyperparameter: num_round``, ``Hyperparameter eta:
2.0 is not in [0, 1]``, ``Extraneous hyperparameter found: foo`` ...).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class UserError(ValueError):
    """A job setting the algorithm refuses; the message is SageMaker's."""


@dataclass(frozen=True)
class Interval:
    lo: float | None = None
    lo_open: bool = False
    hi: float | None = None
    hi_open: bool = False

    def __contains__(self, v: object) -> bool:
        if not isinstance(v, int | float) or (isinstance(v, float) and math.isnan(v)):
            return False
        if self.lo is not None and (v <= self.lo if self.lo_open else v < self.lo):
            return False
        return not (self.hi is not None and (v >= self.hi if self.hi_open else v > self.hi))

    def __str__(self) -> str:
        lo = "(-inf" if self.lo is None else f"{'(' if self.lo_open else '['}{_num(self.lo)}"
        hi = "+inf)" if self.hi is None else f"{_num(self.hi)}{')' if self.hi_open else ']'}"
        return f"{lo}, {hi}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass(frozen=True)
class Spec:
    parse: Callable[[Any], Any]
    allowed: Interval | tuple[str, ...] | None = None
    required: bool = False


def _int(v: Any) -> int:
    if isinstance(v, float) and not v.is_integer():
        raise ValueError(v)
    return int(v)


def _str(v: Any) -> str:
    return str(v)


def _list(v: Any) -> list[str]:
    return [p.strip() for p in str(v).split(",") if p.strip()]


UNIT = Interval(0, False, 1, False)
POS = Interval(0)
OPEN_UNIT = Interval(0, True, 1, False)
OBJECTIVES = (
    "binary:logistic", "binary:logitraw", "binary:hinge", "count:poisson", "multi:softmax", "multi:softprob",
    "rank:pairwise", "rank:ndcg", "rank:map", "reg:linear", "reg:squarederror", "reg:logistic", "reg:gamma",
    "reg:pseudohubererror", "reg:squaredlogerror", "reg:absoluteerror", "reg:tweedie", "survival:aft", "survival:cox",
)
METRICS = (
    "rmse", "rmsle", "mae", "mape", "mphe", "logloss", "error", "merror", "mlogloss", "auc", "aucpr", "ndcg", "map",
    "poisson-nloglik", "gamma-nloglik", "gamma-deviance", "tweedie-nloglik", "cox-nloglik", "aft-nloglik",
    "interval-regression-accuracy", "pre",
)
SPECS: dict[str, Spec] = {
    "num_round": Spec(_int, Interval(1), required=True),
    "csv_weights": Spec(_int, Interval(0, False, 1, False)),
    "early_stopping_rounds": Spec(_int, Interval(1)),
    "booster": Spec(_str, ("gbtree", "gblinear", "dart")),
    "verbosity": Spec(_int, Interval(0, False, 3, False)),
    "nthread": Spec(_int, Interval(1)),
    "eta": Spec(float, UNIT),
    "gamma": Spec(float, POS),
    "max_depth": Spec(_int, POS),
    "min_child_weight": Spec(float, POS),
    "max_delta_step": Spec(float, POS),
    "subsample": Spec(float, OPEN_UNIT),
    "colsample_bytree": Spec(float, OPEN_UNIT),
    "colsample_bylevel": Spec(float, OPEN_UNIT),
    "colsample_bynode": Spec(float, OPEN_UNIT),
    "lambda": Spec(float, POS),
    "alpha": Spec(float, POS),
    "tree_method": Spec(_str, ("auto", "exact", "approx", "hist")),
    "sketch_eps": Spec(float, Interval(0, True, 1, True)),
    "scale_pos_weight": Spec(float, Interval(0, True)),
    "grow_policy": Spec(_str, ("depthwise", "lossguide")),
    "max_leaves": Spec(_int, POS),
    "max_bin": Spec(_int, POS),
    "sample_type": Spec(_str, ("uniform", "weighted")),
    "normalize_type": Spec(_str, ("tree", "forest")),
    "rate_drop": Spec(float, UNIT),
    "one_drop": Spec(_int, Interval(0, False, 1, False)),
    "skip_drop": Spec(float, UNIT),
    "tweedie_variance_power": Spec(float, Interval(1, True, 2, True)),
    "objective": Spec(_str, OBJECTIVES),
    "num_class": Spec(_int, Interval(2)),
    "base_score": Spec(float, POS),
    "eval_metric": Spec(_list),
    "seed": Spec(_int, Interval(-(2**31), True, 2**31 - 1, True)),
    "num_parallel_tree": Spec(_int, Interval(1)),
    "save_model_on_termination": Spec(_str, ("true", "false")),
    "monotone_constraints": Spec(_str),
    "interaction_constraints": Spec(_str),
}
DEFAULTS: dict[str, Any] = {"objective": "reg:squarederror"}


def _check_metric(metric: str) -> None:
    name, at, threshold = metric.partition("@")
    if at:
        if name.strip() not in ("error", "ndcg", "map"):
            raise UserError(
                f"Metric '{metric}' is not supported. Parameter 'eval_metric' with customized threshold should be "
                "one of these options: 'error', 'ndcg', 'map'."
            )
        try:
            float(threshold)
        except ValueError:
            raise UserError(f"Threshold value 't' in '{name}@t' expects float input.") from None
    elif metric not in METRICS:
        raise UserError(f"Hyperparameter eval_metric: value {[metric]} not in range {list(METRICS)}")


def validate(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Typed, checked hyperparameters (defaults filled in); ``sagemaker_*`` keys are ignored."""
    given = {k: v for k, v in raw.items() if not k.startswith(("sagemaker_", "_"))}
    for name in SPECS:
        if SPECS[name].required and name not in given:
            raise UserError(f"Missing required hyperparameter: {name}")
    out: dict[str, Any] = dict(DEFAULTS)
    for name, value in given.items():
        spec = SPECS.get(name)
        if spec is None:
            raise UserError(f"Extraneous hyperparameter found: {name}")
        try:
            parsed = spec.parse(value)
        except (TypeError, ValueError):
            raise UserError(f"Hyperparameter {name}: could not parse value") from None
        allowed = spec.allowed
        if isinstance(allowed, Interval) and parsed not in allowed:
            raise UserError(f"Hyperparameter {name}: {parsed} is not in {allowed}")
        if isinstance(allowed, tuple) and parsed not in allowed:
            raise UserError(f"Hyperparameter {name}: {parsed} is not in {list(allowed)}")
        out[name] = parsed
    for metric in out.get("eval_metric", []):
        _check_metric(metric)
    objective = out["objective"]
    if objective.startswith("multi:") and "num_class" not in out:
        raise UserError("Require input for parameter 'num_class' for multi-classification")
    if "num_class" in out and not objective.startswith("multi:"):
        raise UserError("Do not need to setup parameter 'num_class' for learning task other than multi-classification.")
    if "auc" in out.get("eval_metric", []) and not objective.startswith(("binary:", "rank:")):
        raise UserError("Metric 'auc' can only be applied for classification and ranking problems.")
    return out
