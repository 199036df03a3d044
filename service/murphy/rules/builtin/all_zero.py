"""AllZero: (nearly) every value of a tensor is zero."""

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
    value_at,
    workers_at,
)
from murphy.rules.params import as_float
from murphy.rules.rule import Rule


class AllZero(Rule):
    """Fires when ``100 * count(x == 0) / size(x) >= threshold`` for a selected tensor ``x``.

    Tensors are those of ``collection_names`` and/or ``tensor_regex``, or every tensor when
    neither is given; tensors saved only as reductions are skipped. The finding names the first
    such tensor in layer order and its zero percentage.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str = "",
        *,
        other_trials: Sequence[Any] | None = None,
        collection_names: Any = None,
        tensor_regex: Any = None,
        threshold: Any = "100",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        n = self.rule_name
        reject_unknown(n, extra, ("collection_names", "tensor_regex", "threshold"))
        self.collection_names = optional_list(collection_names, "collection_names", n)
        self.tensor_regex = checked_regexes(tensor_regex, "tensor_regex", n)
        self.threshold = as_float(threshold, "threshold", n)
        require(0 <= self.threshold <= 100, n, "threshold", threshold, "a percentage in [0, 100]")

    def invoke_at_step(self, step: int) -> bool:
        trial = self.base_trial
        for name in selected_in_layer_order(trial, step, self.collection_names, self.tensor_regex):
            for worker in workers_at(trial, name, step):
                value = value_at(trial, name, step, worker=worker)
                if value is None or value.size == 0:
                    continue
                zeros = percent(int(np.count_nonzero(value == 0)), value.size)
                if zeros >= self.threshold:
                    message = (
                        f"{self.rule_name}: tensor {name} is {fmt(zeros)} % zeros{on_worker(worker)} at "
                        f"{step_label(trial, step)} (threshold {fmt(self.threshold)} %)"
                    )
                    return self.found(step, message, tensor=name, value=zeros)
        return False
