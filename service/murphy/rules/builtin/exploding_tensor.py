"""ExplodingTensor: a selected tensor holds NaN or ±inf."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.rules.builtin._common import (
    Array,
    checked_regexes,
    on_worker,
    optional_list,
    reject_unknown,
    selected_in_layer_order,
    step_label,
    value_at,
    workers_at,
)
from murphy.rules.params import as_bool
from murphy.rules.rule import Rule


class ExplodingTensor(Rule):
    """Fires at the first step where any selected tensor has a non-finite value.

    Formula: the tensor ``x`` fails if ``any(~isfinite(x))`` (``any(isnan(x))`` with
    ``only_nan``). Integer and boolean tensors are always finite. A tensor saved only as
    reductions fails if a stored reduction is non-finite (a NaN or inf element makes its
    min/max/mean/norm non-finite). Tensors are those of ``collection_names`` and/or
    ``tensor_regex`` (their union), or every tensor when neither is given.

    The finding names the earliest failing tensor in layer order at that step; its value is the
    number of non-finite elements.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str = "",
        *,
        other_trials: Sequence[Any] | None = None,
        collection_names: Any = None,
        tensor_regex: Any = None,
        only_nan: Any = False,
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        name = self.rule_name
        reject_unknown(name, extra, ("collection_names", "tensor_regex", "only_nan"))
        self.collection_names = optional_list(collection_names, "collection_names", name)
        self.tensor_regex = checked_regexes(tensor_regex, "tensor_regex", name)
        self.only_nan = as_bool(only_nan, "only_nan", name)

    def _bad_count(self, value: Array) -> int:
        if not np.issubdtype(value.dtype, np.inexact):
            return 0
        bad = np.isnan(value) if self.only_nan else ~np.isfinite(value)
        return int(np.count_nonzero(bad))

    def _reductions_bad(self, name: str, step: int, worker: str | None) -> int:
        stored = self.base_trial.tensor(name).reduction_values(step, worker=worker)
        return sum(self._bad_count(np.asarray(v)) for v in stored.values())

    def invoke_at_step(self, step: int) -> bool:
        trial = self.base_trial
        names = selected_in_layer_order(trial, step, self.collection_names, self.tensor_regex)
        for name in names:
            for worker in workers_at(trial, name, step):
                if self._check(name, step, worker):
                    return True
        return False

    def _check(self, name: str, step: int, worker: str | None) -> bool:
        trial = self.base_trial
        value = value_at(trial, name, step, worker=worker)
        if value is not None:
            bad, total, what = self._bad_count(value), value.size, "values"
        else:
            bad, total, what = self._reductions_bad(name, step, worker), 0, "stored reductions"
        if not bad:
            return False
        kind = "NaN" if self.only_nan else "non-finite (NaN/inf)"
        of = f" of {total}" if total else ""
        message = (
            f"{self.rule_name}: tensor {name} has {bad}{of} {kind} {what}{on_worker(worker)} at "
            f"{step_label(trial, step)} (threshold: every value finite); it is the "
            "first such tensor in layer order"
        )
        return self.found(step, message, tensor=name, value=float(bad))
