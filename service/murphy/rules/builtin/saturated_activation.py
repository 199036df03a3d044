"""SaturatedActivation: most tanh/sigmoid units of a layer sit in the flat tails."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.rules.builtin._common import (
    checked_regexes,
    fmt,
    on_worker,
    optional_list,
    percent,
    reject_unknown,
    require,
    selected_in_layer_order,
    step_label,
    unit_activity_percent,
    value_at,
    workers_at,
)
from murphy.rules.params import RuleParameterError, as_float
from murphy.rules.rule import Rule

DEFAULT_REGEX = ".*tanh_input|.*sigmoid_input"


class SaturatedActivation(Rule):
    """Fires when more than ``threshold_layer`` % of a tanh/sigmoid layer's units are saturated.

    For an activation *input* tensor, axis 0 is the batch and every other position a unit. A
    sample is active when the input lies inside ``[threshold_<kind>_min, threshold_<kind>_max]``
    (``kind`` is ``sigmoid`` when the tensor name contains "sigmoid", else ``tanh``). A unit's
    activity is the % of active samples; it is saturated if activity < ``threshold_inactivity``
    %. The layer fails if ``100 * saturated / units > threshold_layer``. Tensors: those of
    ``collection_names`` and/or ``tensor_regex`` (default ``.*tanh_input|.*sigmoid_input``).
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str = "",
        *,
        other_trials: Sequence[Any] | None = None,
        collection_names: Any = None,
        tensor_regex: Any = DEFAULT_REGEX,
        threshold_tanh_min: Any = "-9.4999",
        threshold_tanh_max: Any = "9.4999",
        threshold_sigmoid_min: Any = "-23",
        threshold_sigmoid_max: Any = "16.99999",
        threshold_inactivity: Any = "1.0",
        threshold_layer: Any = "50.0",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        n = self.rule_name
        reject_unknown(n, extra, (
            "collection_names", "tensor_regex", "threshold_tanh_min", "threshold_tanh_max",
            "threshold_sigmoid_min", "threshold_sigmoid_max", "threshold_inactivity", "threshold_layer"))
        self.collection_names = optional_list(collection_names, "collection_names", n)
        self.tensor_regex = checked_regexes(tensor_regex, "tensor_regex", n)
        if self.tensor_regex is None and self.collection_names is None:
            self.tensor_regex = [DEFAULT_REGEX]
        self.tanh = self._range(threshold_tanh_min, threshold_tanh_max, "tanh")
        self.sigmoid = self._range(threshold_sigmoid_min, threshold_sigmoid_max, "sigmoid")
        self.threshold_inactivity = as_float(threshold_inactivity, "threshold_inactivity", n)
        require(0 <= self.threshold_inactivity <= 100, n, "threshold_inactivity",
                threshold_inactivity, "a percentage in [0, 100]")
        self.threshold_layer = as_float(threshold_layer, "threshold_layer", n)
        require(0 <= self.threshold_layer <= 100, n, "threshold_layer", threshold_layer,
                "a percentage in [0, 100]")

    def _range(self, lo: Any, hi: Any, kind: str) -> tuple[float, float]:
        low = as_float(lo, f"threshold_{kind}_min", self.rule_name)
        high = as_float(hi, f"threshold_{kind}_max", self.rule_name)
        if low >= high:
            raise RuleParameterError(
                f"{self.rule_name}: threshold_{kind}_min={lo!r} must be below threshold_{kind}_max={hi!r}"
            )
        return low, high

    def invoke_at_step(self, step: int) -> bool:
        trial = self.base_trial
        for name in selected_in_layer_order(trial, step, self.collection_names, self.tensor_regex):
            for worker in workers_at(trial, name, step):
                value = value_at(trial, name, step, worker=worker)
                if value is None or value.size == 0:
                    continue
                low, high = self.sigmoid if "sigmoid" in name.lower() else self.tanh
                activity = unit_activity_percent((value >= low) & (value <= high))
                saturated = percent(int(np.count_nonzero(activity < self.threshold_inactivity)), activity.size)
                if saturated > self.threshold_layer:
                    message = (
                        f"{self.rule_name}: {fmt(saturated)} % of the units of {name} are saturated "
                        f"(input outside [{fmt(low)}, {fmt(high)}] in > {fmt(100 - self.threshold_inactivity)} "
                        f"% of samples){on_worker(worker)} at {step_label(trial, step)} "
                        f"(threshold {fmt(self.threshold_layer)} %)"
                    )
                    return self.found(step, message, tensor=name, value=saturated)
        return False
