"""PoorWeightInitialization: signs of a bad initialisation in the first steps."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.core.modes import ModeKeys
from murphy.rules.builtin._common import (
    Array,
    checked_regexes,
    collection_names_at,
    fmt,
    layer_order,
    loss_names,
    reject_unknown,
    require,
    scalar,
    value_at,
)
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import as_float, as_int


def _spread(values: Array) -> float:
    """The 5th-95th percentile spread of the finite values."""
    finite = values[np.isfinite(values)]
    if finite.size < 2:
        return float("inf")
    p5, p95 = np.percentile(finite, [5, 95])
    return float(p95 - p5)


class PoorWeightInitialization(EveryWorker):
    """Checks the first ``steps`` TRAIN steps (GLOBAL steps in a trial without modes) and fires
    at the first of:

    1. **Activation variance**: for the tensors matching ``activation_inputs_regex`` at the
       step, in layer order, the variance ratio of two *adjacent* layers
       ``max(var_i, var_i+1) / min(var_i, var_i+1) > threshold`` (``inf`` when one variance is 0
       and the other not; needs two tensors; all-zero variances are left to check 2).

       Adjacent layers, not the max/min over the whole network: PyTorch's default
       initialisation (``kaiming_uniform_(a=sqrt(5))``, weight variance ``1/(3 fan_in)``) shrinks
       the variance of ReLU inputs about 6x per layer, so the max/min ratio over a healthy
       default-initialised 3-layer MLP is ~36 and over any deeper network larger still: the
       global ratio fired at step 0 of every healthy run in ``benchmarks/rule_quality``. What
       a bad initialisation does is change the scale by a large factor *per layer* (N(0, 1)
       weights: ~fan_in/2, e.g. 32x for 64 units; std 0.01: ~300x less), which the adjacent
       ratio measures independently of depth.
    2. **Gradient spread**: the 5th-95th percentile spread of all values of the ``gradients``
       collection at the step, pooled, ``< distribution_range`` (the finding names the first
       gradient in layer order whose own spread is below it).
    3. **Loss stuck**: for a ``losses`` tensor, the mean of its latest ``patience`` saves is
       not lower than the mean of the ``patience`` saves before them (judged from the
       ``2 * patience``-th save on, so with ``steps < 2 * patience`` saved steps never).
       Minibatch losses are noisy, and "no new minimum for ``patience`` saves" fired on
       healthy runs whose loss was falling, after one lucky early batch; two window means
       compare the level of the loss, not its luckiest value.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str = "",
        *,
        other_trials: Sequence[Any] | None = None,
        activation_inputs_regex: Any = ".*relu_input",
        threshold: Any = "10.0",
        distribution_range: Any = "0.001",
        patience: Any = "5",
        steps: Any = "10",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        n = self.rule_name
        reject_unknown(n, extra, ("activation_inputs_regex", "threshold", "distribution_range",
                                  "patience", "steps"))
        regex = checked_regexes(activation_inputs_regex, "activation_inputs_regex", n)
        self.activation_inputs_regex = regex or [".*relu_input"]
        self.threshold = as_float(threshold, "threshold", n)
        require(self.threshold >= 1, n, "threshold", threshold, ">= 1")
        self.distribution_range = as_float(distribution_range, "distribution_range", n)
        self.patience = as_int(patience, "patience", n)
        require(self.patience >= 1, n, "patience", patience, ">= 1")
        self.steps = as_int(steps, "steps", n)
        require(self.steps >= 1, n, "steps", steps, ">= 1")
        self._losses: dict[str, list[float]] = {}
        self._last: int = -1

    def invoke_worker_step(self, step: int) -> bool:
        mode, mode_step = self.base_trial.mode_modestep(step)
        if mode not in (ModeKeys.TRAIN, ModeKeys.GLOBAL) or mode_step is None or mode_step >= self.steps:
            return False
        return self._variance(step) or self._gradients(step) or self._loss(step)

    def _variance(self, step: int) -> bool:
        trial = self.base_trial
        names = layer_order(trial, trial.tensor_names(step=step, regex=self.activation_inputs_regex), step)
        variances: list[tuple[str, float]] = []
        for name in names:
            value = value_at(trial, name, step)
            if value is not None and value.size:
                variances.append((name, float(np.var(value.astype(np.float64)))))
        for (a, va), (b, vb) in itertools.pairwise(variances):
            hi, lo = max(va, vb), min(va, vb)
            if hi == 0:
                continue
            ratio = hi / lo if lo > 0 else float("inf")
            if ratio > self.threshold:
                message = (
                    f"{self.rule_name}: activation input variance changes {fmt(ratio)}x between "
                    f"adjacent layers (threshold {fmt(self.threshold)}) at step {step}: {a} var "
                    f"{fmt(va)}, {b} var {fmt(vb)}"
                )
                return self.found(step, message, tensor=a if va <= vb else b, value=ratio)
        return False

    def _gradients(self, step: int) -> bool:
        trial = self.base_trial
        grads = [(n, v) for n in layer_order(trial, collection_names_at(trial, "gradients", step), step)
                 if (v := value_at(trial, n, step)) is not None and v.size]
        if not grads:
            return False
        pooled = _spread(np.concatenate([v.astype(np.float64).ravel() for _, v in grads]))
        if pooled >= self.distribution_range:
            return False
        culprit = next((n for n, v in grads if _spread(v.astype(np.float64).ravel()) < self.distribution_range),
                       grads[0][0])
        message = (
            f"{self.rule_name}: gradient 5th-95th percentile spread {fmt(pooled)} < distribution_range "
            f"{fmt(self.distribution_range)} at step {step} (first narrow gradient: {culprit})"
        )
        return self.found(step, message, tensor=culprit, value=pooled)

    def _loss(self, step: int) -> bool:
        if step <= self._last:
            return False
        self._last = step
        trial = self.base_trial
        p = self.patience
        for name in loss_names(trial, None, None):
            if step not in trial.tensor(name).steps():
                continue
            seen = self._losses.setdefault(name, [])
            seen.append(scalar(trial.tensor(name).value(step)))
            if len(seen) < 2 * p:
                continue
            before, latest = sum(seen[-2 * p:-p]) / p, sum(seen[-p:]) / p
            if latest >= before:
                message = (
                    f"{self.rule_name}: loss {name} is not decreasing in the first steps: mean "
                    f"{fmt(latest)} over the {p} saves up to step {step} vs {fmt(before)} over the "
                    f"{p} saves before (patience {p})"
                )
                return self.found(step, message, tensor=name, value=latest)
        return False
