"""CheckInputImages: input images are not normalised (their per-channel mean is far from 0)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.rules.builtin._common import (
    Array,
    checked_regexes,
    fmt,
    layer_order,
    reject_unknown,
    require,
    step_label,
    value_at,
)
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import RuleParameterError, as_float, as_int

_ACCEPTED = ("threshold_mean", "threshold_samples", "regex", "channel")


class _Running:
    """Per-channel running sums of one input tensor."""

    def __init__(self, channels: int) -> None:
        self.sums = np.zeros(channels, dtype=np.float64)
        self.counts = np.zeros(channels, dtype=np.int64)
        self.samples = 0


class CheckInputImages(EveryWorker):
    """Fires once ``threshold_samples`` images of a tensor matching ``regex`` have been seen and
    the mean of some colour channel differs from 0 by more than ``threshold_mean``.

    Formula: axis 0 of the input tensor is the batch (its length counts images) and axis
    ``channel`` (negative counts from the end: ``-1`` for channels-last) is the colour axis.
    For each channel ``c`` the rule keeps a running sum and element count over every evaluated
    step (each step counted once), so ``mean_c = Σ x[:, c, ...] / count_c`` over all images seen
    so far. It fires at the first step where ``images_seen >= threshold_samples`` and
    ``|mean_c| > threshold_mean`` for some ``c``; the channel with the largest ``|mean_c|`` is
    reported. Non-finite elements are left out of the sums. A tensor with no axis ``channel``
    besides the batch axis is a parameter error.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str | Sequence[Any] | None = "",
        other_trials: Sequence[Any] | None = None,
        *,
        threshold_mean: Any = "0.2",
        threshold_samples: Any = "500",
        regex: Any = ".*hybridsequential0_input_0",
        channel: Any = "1",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        name = self.rule_name
        reject_unknown(name, extra, _ACCEPTED)
        self.threshold_mean = as_float(threshold_mean, "threshold_mean", name)
        require(self.threshold_mean >= 0, name, "threshold_mean", threshold_mean, ">= 0")
        self.threshold_samples = as_int(threshold_samples, "threshold_samples", name)
        require(self.threshold_samples >= 1, name, "threshold_samples", threshold_samples, "an integer >= 1")
        self.regex = checked_regexes(regex, "regex", name) or [".*hybridsequential0_input_0"]
        self.channel = as_int(channel, "channel", name)
        require(self.channel != 0, name, "channel", channel, "the colour axis, not 0 (the batch axis)")
        self._running: dict[str, _Running] = {}
        self._counted: set[tuple[str, int]] = set()

    def _axis(self, tname: str, value: Array) -> int:
        axis = self.channel + value.ndim if self.channel < 0 else self.channel
        if not 0 < axis < value.ndim:
            raise RuleParameterError(
                f"{self.rule_name}: parameter channel={self.channel} is not a colour axis of "
                f"{tname!r} with shape {value.shape} (axis 0 is the batch)"
            )
        return axis

    def _add(self, tname: str, step: int, value: Array) -> _Running:
        axis = self._axis(tname, value)
        run = self._running.get(tname)
        if run is None or run.sums.size != value.shape[axis]:
            run = self._running[tname] = _Running(value.shape[axis])
        if (tname, step) not in self._counted:
            self._counted.add((tname, step))
            per_channel = np.moveaxis(value.astype(np.float64), axis, 0).reshape(value.shape[axis], -1)
            finite = np.isfinite(per_channel)
            run.sums += np.where(finite, per_channel, 0.0).sum(axis=1)
            run.counts += finite.sum(axis=1)
            run.samples += int(value.shape[0])
        return run

    def invoke_worker_step(self, step: int) -> bool:
        names = self.base_trial.tensor_names(step=step, regex=self.regex)
        for tname in layer_order(self.base_trial, names, step):
            value = value_at(self.base_trial, tname, step)
            if value is None or not value.size:
                continue
            run = self._add(tname, step, value)
            if run.samples < self.threshold_samples or not run.counts.any():
                continue
            means = np.divide(run.sums, run.counts, out=np.zeros_like(run.sums), where=run.counts > 0)
            c = int(np.argmax(np.abs(means)))
            if abs(means[c]) > self.threshold_mean:
                return self.found(
                    step,
                    f"channel {c} (axis {self._axis(tname, value)}) of {tname!r} has mean "
                    f"{fmt(float(means[c]))} over {run.samples} images up to "
                    f"{step_label(self.base_trial, step)}: |mean| > threshold_mean "
                    f"{fmt(self.threshold_mean)} (inputs not normalised?)",
                    tensor=tname, value=float(means[c]),
                )
        return False
