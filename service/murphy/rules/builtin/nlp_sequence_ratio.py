"""NLPSequenceRatio: some token (padding, unknown ...) takes too large a share of the input
sequences."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.rules.builtin._common import (
    checked_regexes,
    fmt,
    layer_order,
    reject_unknown,
    require,
    step_label,
    value_at,
)
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import RuleParameterError, as_float, as_list

_ACCEPTED = ("tensor_regex", "token_values", "token_thresholds_percent")


class NLPSequenceRatio(EveryWorker):
    """Fires at the first step where, in an input tensor matching ``tensor_regex``, the share of
    a token in ``token_values`` is above its threshold in ``token_thresholds_percent``.

    Formula, per step and per matching tensor (the batch of token ids saved at that step):
    ``share_t = 100 * #(x == t) / x.size`` over all positions of all sequences in the batch;
    it fires when ``share_t > threshold_t``. Each step is judged on its own batch, so one
    mostly-padding batch is enough. ``token_values`` and ``token_thresholds_percent`` are
    comma lists of the same length (a single threshold applies to every token). Tensors are
    checked in layer order, tokens in the order given.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str | Sequence[Any] | None = "",
        other_trials: Sequence[Any] | None = None,
        *,
        tensor_regex: Any = ".*embedding0_input_0",
        token_values: Any = "0",
        token_thresholds_percent: Any = "50",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        name = self.rule_name
        reject_unknown(name, extra, _ACCEPTED)
        self.tensor_regex = checked_regexes(tensor_regex, "tensor_regex", name) or [".*embedding0_input_0"]
        tokens = as_list(token_values, "token_values", name)
        thresholds = as_list(token_thresholds_percent, "token_thresholds_percent", name)
        if not tokens:
            raise RuleParameterError(f"{name}: parameter token_values is empty")
        if len(thresholds) == 1:
            thresholds = thresholds * len(tokens)
        if len(thresholds) != len(tokens):
            raise RuleParameterError(
                f"{name}: token_thresholds_percent has {len(thresholds)} values but token_values "
                f"has {len(tokens)}; give one threshold per token (or a single one for all)"
            )
        self.token_values = [as_float(t, "token_values", name) for t in tokens]
        self.token_thresholds_percent = [as_float(t, "token_thresholds_percent", name) for t in thresholds]
        for t in self.token_thresholds_percent:
            require(0 <= t <= 100, name, "token_thresholds_percent", t, "a percentage between 0 and 100")

    def invoke_worker_step(self, step: int) -> bool:
        names = self.base_trial.tensor_names(step=step, regex=self.tensor_regex)
        for tname in layer_order(self.base_trial, names, step):
            value = value_at(self.base_trial, tname, step)
            if value is None or not value.size:
                continue
            for token, threshold in zip(self.token_values, self.token_thresholds_percent, strict=True):
                share = 100.0 * float(np.count_nonzero(value == token)) / value.size
                if share > threshold:
                    return self.found(
                        step,
                        f"token {fmt(token)} is {fmt(share)}% of the {value.size} positions of "
                        f"{tname!r} at {step_label(self.base_trial, step)} (> "
                        f"token_thresholds_percent {fmt(threshold)}%)",
                        tensor=tname, value=share,
                    )
        return False
