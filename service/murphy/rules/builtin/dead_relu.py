"""DeadRelu: most ReLUs of a layer never activate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.rules.builtin._common import (
    checked_regexes,
    fmt,
    on_worker,
    percent,
    reject_unknown,
    require,
    selected_in_layer_order,
    step_label,
    unit_activity_percent,
    value_at,
    workers_at,
)
from murphy.rules.params import as_float
from murphy.rules.rule import Rule


class DeadRelu(Rule):
    """Fires when more than ``threshold_layer`` % of a layer's ReLUs are dead.

    For a ReLU output tensor (matching ``tensor_regex``, default ``.*relu_output``) axis 0 is
    the batch and every other position a unit. A unit's activity is the % of samples in which
    its output is > 0; a unit is dead if its activity < ``threshold_inactivity`` %. The layer
    fails if ``100 * dead / units > threshold_layer``. The finding names the first failing
    layer in layer order and its dead percentage.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str = "",
        *,
        other_trials: Sequence[Any] | None = None,
        tensor_regex: Any = ".*relu_output",
        threshold_inactivity: Any = "1.0",
        threshold_layer: Any = "50.0",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        n = self.rule_name
        reject_unknown(n, extra, ("tensor_regex", "threshold_inactivity", "threshold_layer"))
        self.tensor_regex = checked_regexes(tensor_regex, "tensor_regex", n) or [".*relu_output"]
        self.threshold_inactivity = as_float(threshold_inactivity, "threshold_inactivity", n)
        require(0 <= self.threshold_inactivity <= 100, n, "threshold_inactivity",
                threshold_inactivity, "a percentage in [0, 100]")
        self.threshold_layer = as_float(threshold_layer, "threshold_layer", n)
        require(0 <= self.threshold_layer <= 100, n, "threshold_layer", threshold_layer,
                "a percentage in [0, 100]")

    def invoke_at_step(self, step: int) -> bool:
        trial = self.base_trial
        for name in selected_in_layer_order(trial, step, None, self.tensor_regex):
            for worker in workers_at(trial, name, step):
                value = value_at(trial, name, step, worker=worker)
                if value is None or value.size == 0:
                    continue
                activity = unit_activity_percent(value > 0)
                dead = percent(int(np.count_nonzero(activity < self.threshold_inactivity)), activity.size)
                if dead > self.threshold_layer:
                    message = (
                        f"{self.rule_name}: {fmt(dead)} % of the units of {name} are dead (active in "
                        f"< {fmt(self.threshold_inactivity)} % of samples){on_worker(worker)} at "
                        f"{step_label(trial, step)} (threshold {fmt(self.threshold_layer)} %)"
                    )
                    return self.found(step, message, tensor=name, value=dead)
        return False
