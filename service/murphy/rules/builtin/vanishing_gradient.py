"""VanishingGradient: some gradient's mean absolute value is below a threshold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from murphy.rules.builtin._common import (
    abs_mean_at,
    collection_names_at,
    fmt,
    layer_order,
    on_worker,
    reject_unknown,
    require,
    step_label,
    workers_at,
)
from murphy.rules.params import as_float
from murphy.rules.rule import Rule


class VanishingGradient(Rule):
    """Fires at the first step where ``mean(|g|) < threshold`` for a tensor ``g`` of the
    ``gradients`` collection.

    ``mean(|g|)`` is the stored ``abs_mean`` reduction when the hook saved one, else it is
    computed from the raw tensor. A NaN mean never counts as vanishing (ExplodingTensor's job).
    The finding names the first such gradient in layer order and its ``mean(|g|)``.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str = "",
        *,
        other_trials: Sequence[Any] | None = None,
        threshold: Any = "0.0000001",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        reject_unknown(self.rule_name, extra, ("threshold",))
        self.threshold = as_float(threshold, "threshold", self.rule_name)
        require(self.threshold >= 0, self.rule_name, "threshold", threshold, ">= 0")

    def invoke_at_step(self, step: int) -> bool:
        trial = self.base_trial
        names = collection_names_at(trial, "gradients", step)
        for name in layer_order(trial, names, step):
            for worker in workers_at(trial, name, step):
                mean_abs = abs_mean_at(trial, name, step, worker)
                if mean_abs is not None and mean_abs < self.threshold:
                    message = (
                        f"{self.rule_name}: gradient {name} has mean(|g|) = {fmt(mean_abs)}{on_worker(worker)} at "
                        f"{step_label(trial, step)}, below threshold {fmt(self.threshold)}"
                    )
                    return self.found(step, message, tensor=name, value=mean_abs)
        return False
