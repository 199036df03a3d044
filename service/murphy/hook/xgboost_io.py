"""Pieces of the XGBoost hook that need no xgboost: the inline writer, the snapshot backend, the
metrics-only round's replayed plan and the JSON config's default save interval."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from murphy.core.save_config import SaveConfig
from murphy.hook.backend import NumpyBackend
from murphy.hook.config import HookConfig
from murphy.hook.writer import BackgroundWriter, Record, StepBatch, _Flush
from murphy.hook.xgboost_names import DEFAULT_SAVE_INTERVAL, metric_name
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

    def submit_step(self, batch: StepBatch) -> None:
        # Cold after each boosting round, every frame costs: a step of float metrics (the
        # default round) is written here, without _put, _handle, _write_step and _give_back
        # (the same guard; XGBoost snapshots have nothing to give back). Anything else takes them.
        items = self._float_items(batch) if self._release is None else None
        if items is None:
            self._put(batch)
            return
        if self._closed or self._guard.disabled:
            return
        try:
            self._write_floats(batch, items)
        except Exception as exc:
            self._guard.trip(exc, f"writer (step {batch.step})")
        finally:
            batch.records = []

    def _float_items(self, batch: StepBatch) -> list[tuple[str, float]] | None:
        """``(name, value)`` of a step of plain float records (the one-pass writer's), else None."""
        records = batch.records
        if self.tensorboard is not None or batch.fence is not None or not records:
            return None
        items = []
        for r in records:  # a loop, not any() and a comprehension: two frames less a round
            if type(r.snap) is not float or r.shape is not None:
                return None
            items.append((r.name, r.snap))
        return items

    def _write_step(self, batch: StepBatch) -> None:
        items = self._float_items(batch)
        if items is None:
            super()._write_step(batch)
        else:
            self._write_floats(batch, items)

    def _write_floats(self, batch: StepBatch, items: list[tuple[str, float]]) -> None:
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


# (collections generation, due collections, (eval name, metric, tensor name) of each metric in
# ``evals_log`` order, (position, shape) of each record).
MetricPlan = tuple[int, frozenset[str], tuple[tuple[str, str, str], ...], tuple[tuple[int, Any], ...]]
EvalsLog = Mapping[str, Mapping[str, Sequence[Any]]]


def metric_plan(generation: int, due: frozenset[str], evals_log: EvalsLog, records: list[Record]) -> MetricPlan | None:
    """What a round that saved only float metrics wrote: which of ``evals_log``'s metrics (as
    ``metric_items`` names them) became ``records``, in order, with their shapes. None when a
    record is anything else (the general path then decides every round)."""
    keys = tuple((e, m, metric_name(e, m)) for e, results in evals_log.items() for m, history in results.items()
                 if len(history))
    position = {name: i for i, (_, _, name) in enumerate(keys)}
    if any(type(r.snap) is not float or r.name not in position for r in records):
        return None
    return generation, due, keys, tuple((position[r.name], r.shape) for r in records)


def replay_metric_plan(plan: MetricPlan, generation: int, due: frozenset[str], evals_log: EvalsLog) -> list[Record] | None:
    """The records ``plan`` gives for this round's ``evals_log``; None (the general path decides)
    when the collections, the due set, the metrics or a value's type differ.

    One pass over ``evals_log`` that compares each metric's keys with the plan's, in loops (no
    generator frames) and without formatting the names again (``metric_items``): it runs cold,
    after each saved boosting round.
    """
    if plan[0] != generation or plan[1] != due:
        return None
    keys = plan[2]
    count = len(keys)
    values: list[Any] = []
    for eval_name, results in evals_log.items():
        for metric, history in results.items():
            if len(history):
                i = len(values)
                if i == count or keys[i][0] != eval_name or keys[i][1] != metric:
                    return None
                values.append(history[-1])
    if len(values) != count:
        return None
    records = []
    for i, shape in plan[3]:
        value = values[i]
        if type(value) is not float:
            return None
        records.append(Record(keys[i][2], value, shape))
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
