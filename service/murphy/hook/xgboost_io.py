"""Pieces of the XGBoost hook that need no xgboost: the inline writer, the snapshot backend, the
metrics-only round's replayed plan and the JSON config's default save interval."""

from __future__ import annotations

import dataclasses
from typing import Any

from murphy.core.save_config import SaveConfig
from murphy.hook.backend import NumpyBackend
from murphy.hook.config import HookConfig
from murphy.hook.writer import BackgroundWriter, Record, StepBatch, _Flush
from murphy.hook.xgboost_names import DEFAULT_SAVE_INTERVAL
from murphy.tensorio.float_step import FloatSteps


class InlineWriter(BackgroundWriter):
    """The background writer's work, done at once on the calling thread (same order, same guard).

    A boosting round saves a few small tensors; handing them to a thread costs more (waking it,
    then GIL hand-offs while xgboost runs) than writing two local files in the callback, which is
    what smdebug does too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Keeps each metric's record pieces and index fragment: a round encodes two doubles.
        self._float_steps = FloatSteps(self._worker)

    def _put(self, item: object, force: bool = False) -> None:
        if self._closed and not force:
            return
        if isinstance(item, _Flush):
            item.done.set()
        elif not self._guard.disabled:
            self._handle(item)

    def _write_step(self, batch: StepBatch) -> None:
        records = batch.records
        items: list[tuple[str, float]] | None = None
        if self.tensorboard is None and batch.fence is None and records:
            items = []
            for r in records:  # a loop, not any() and a comprehension: two frames less a round
                if type(r.snap) is not float or r.shape is not None:
                    items = None
                    break
                items.append((r.name, r.snap))
        if items is None:
            super()._write_step(batch)
            return
        # A round of float metrics (the default): the same files in one pass, no StepWriter.
        manifest = self.manifest
        if manifest is not None:
            manifest.begin()
        key, data = self._float_steps.write(self._store, batch.step, batch.mode, batch.mode_step, items)
        self.steps_written += 1
        if manifest is not None:
            manifest.add(key, batch.step, data)

    def close(self, timeout: float | None = None) -> None:
        self._closed = True
        if self.tensorboard is not None:
            self.tensorboard.close()


class XGBoostBackend(NumpyBackend):
    """numpy snapshots, with a Python float (what ``evals_log`` holds) kept as it is.

    A float is immutable, so it is its own snapshot; the writer encodes it as the float64 array
    of shape [1] that smdebug's ``make_numpy_array`` makes of it (``murphy.tensorio.events``),
    without building that array on the training thread.
    """

    def snapshot(self, value: Any) -> Any:
        return value if type(value) is float else super().snapshot(value)

    def shape(self, value: Any) -> tuple[int, ...]:
        return (1,) if type(value) is float else super().shape(value)


# (collections generation, due collections, metric names, (position, shape) of each record).
MetricPlan = tuple[int, frozenset[str], tuple[str, ...], tuple[tuple[int, Any], ...]]


def metric_plan(
    generation: int, due: frozenset[str], items: list[tuple[str, Any]], records: list[Record]
) -> MetricPlan | None:
    """What a round that saved only float metrics wrote: which of ``items`` (the round's
    ``(name, value)`` metrics) became ``records``, in order, with their shapes. None when a
    record is anything else (the general path then decides every round)."""
    position = {name: i for i, (name, _) in enumerate(items)}
    if any(type(r.snap) is not float or r.name not in position for r in records):
        return None
    return generation, due, tuple(name for name, _ in items), tuple((position[r.name], r.shape) for r in records)


def replay_metric_plan(
    plan: MetricPlan, generation: int, due: frozenset[str], items: list[tuple[str, Any]]
) -> list[Record] | None:
    """The records ``plan`` gives for this round's ``items``; None (the general path decides)
    when the collections, the due set, the metric names or a value's type differ."""
    if plan[0] != generation or plan[1] != due or len(items) != len(plan[2]):
        return None
    for i, name in enumerate(plan[2]):  # a loop, not any(): no generator frames at every round
        if name != items[i][0]:
            return None
    records = []
    for i, shape in plan[3]:
        name, value = items[i]
        if type(value) is not float:
            return None
        records.append(Record(name, value, shape))
    return records


def xgboost_save_config(cfg: HookConfig) -> SaveConfig:
    """The hook's save config, with XGBoost's default interval (10) where none was given."""
    if cfg.save_config is None:
        return SaveConfig(save_interval=DEFAULT_SAVE_INTERVAL)
    if any(k.rpartition(".")[2] == "save_interval" for k in cfg.hook_parameters):
        return cfg.save_config
    modes = {
        mode: dataclasses.replace(c, save_interval=DEFAULT_SAVE_INTERVAL)
        for mode, c in cfg.save_config.mode_save_configs.items()
        if c is not None
    }
    return SaveConfig(mode_save_configs=modes)
