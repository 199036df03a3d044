"""A tiny builder of synthetic trials for rule tests, written with murphy's real tensorio writer.

Usage::

    kit = TrialKit()                                  # in-memory store, PyTorch-like collections
    kit.step(0, {"gradient/fc_weight": g0, "fc_weight": w0, "MSELoss_output_0": 0.3})
    kit.step(1, {...}, mode=ModeKeys.TRAIN)           # mode step counted per mode automatically
    kit.steps({2: {...}, 3: {...}})
    trial = kit.end().trial()                         # end marker, then create_trial

Tensors are written in dict order, which is the order the hook wrote them ("layer order").
``reductions={"gradient/fc_weight": {("mean", True): 1e-9}}`` adds stored reductions;
``raw=False`` on :meth:`TrialKit.step` writes only the reductions.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from murphy.core.collection import Collection, CollectionsDoc
from murphy.core.modes import ModeKeys
from murphy.exceptions import StepUnavailable, TensorUnavailable, TensorUnavailableForStep
from murphy.storage import InMemoryObjectStore, LocalObjectStore
from murphy.storage.base import ObjectStore
from murphy.tensorio.locations import reduction_tensor_name
from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training
from murphy.trial import create_trial
from murphy.trial.trial import Trial

# The PyTorch hook's collection regexes (spec §d), plus the activation collections the
# built-in rules ask for.
PYTORCH_COLLECTIONS: dict[str, list[str]] = {
    "all": [],
    "default": [],
    "weights": ["^(?!gradient).*weight"],
    "biases": ["^(?!gradient).*bias"],
    "gradients": ["^gradient"],
    "losses": ["[Ll]oss_(?!input).*output"],
    "relu_output": [".*relu_output"],
    "relu_input": [".*relu_input"],
    "tanh_input": [".*tanh_input"],
    "sigmoid_input": [".*sigmoid_input"],
}

_counter = itertools.count()


def make_collections(extra: Mapping[str, list[str] | str] | None = None) -> dict[str, Collection]:
    """The PyTorch collections, plus or overridden by ``extra`` ({name: regex or regexes})."""
    regexes: dict[str, list[str] | str] = {**PYTORCH_COLLECTIONS, **(extra or {})}
    return {name: Collection(name, include_regex=r) for name, r in regexes.items()}


class TrialKit:
    """Writes a synthetic trial step by step; :meth:`trial` opens it with ``create_trial``."""

    def __init__(
        self,
        where: ObjectStore | str | os.PathLike[str] | None = None,
        *,
        collections: Mapping[str, list[str] | str] | None = None,
        worker: str = "worker_0",
        num_workers: int = 1,
    ) -> None:
        if where is None:
            self.store: ObjectStore = InMemoryObjectStore(f"trialkit-{os.getpid()}-{next(_counter)}")
        elif isinstance(where, ObjectStore):
            self.store = where
        else:
            self.store = LocalObjectStore(os.fspath(where))
        self.worker = worker
        self._mode_steps: dict[ModeKeys, int] = {}
        write_collections(self.store, CollectionsDoc(make_collections(collections), num_workers), worker)

    def step(
        self,
        step: int,
        tensors: Mapping[str, Any],
        *,
        mode: ModeKeys = ModeKeys.GLOBAL,
        mode_step: int | None = None,
        reductions: Mapping[str, Mapping[tuple[str, bool], Any]] | None = None,
        raw: bool = True,
    ) -> TrialKit:
        """Write global ``step``: ``tensors`` in order (scalars are fine), then reductions.

        ``mode_step`` defaults to the count of earlier steps written in ``mode`` (the global step
        for GLOBAL).
        """
        if mode_step is None:
            mode_step = step if mode is ModeKeys.GLOBAL else self._mode_steps.get(mode, 0)
        self._mode_steps[mode] = mode_step + 1
        with StepWriter(self.store, step, self.worker, mode, mode_step) as w:
            if raw:
                for name, value in tensors.items():
                    w.add(name, _array(value))
            for base, reds in (reductions or {}).items():
                for (op, abs_), value in reds.items():
                    w.add(reduction_tensor_name(base, op, abs_), _array(value))
        return self

    def steps(
        self, data: Mapping[int, Mapping[str, Any]], *, mode: ModeKeys = ModeKeys.GLOBAL
    ) -> TrialKit:
        """Write several steps ({global step: {name: value}}) in ascending order."""
        for s in sorted(data):
            self.step(s, data[s], mode=mode)
        return self

    def end(self) -> TrialKit:
        """Write the end-of-training marker."""
        write_end_of_training(self.store)
        return self

    def trial(self, **kwargs: Any) -> Trial:
        """Open the trial (fast polling; ``kwargs`` go to ``create_trial``)."""
        kwargs.setdefault("poll_interval", 0.01)
        kwargs.setdefault("end_delay", 0.0)
        return create_trial(self.store, **kwargs)


def _array(value: Any) -> np.ndarray[Any, Any]:
    arr = np.asarray(value)
    # Python floats would become float64; the PyTorch hook writes float32.
    return arr.astype(np.float32) if arr.dtype == np.float64 else arr


def write_trial(
    data: Mapping[int, Mapping[str, Any]],
    *,
    where: ObjectStore | str | os.PathLike[str] | None = None,
    mode: ModeKeys = ModeKeys.GLOBAL,
    collections: Mapping[str, list[str] | str] | None = None,
    end: bool = True,
) -> Trial:
    """Shortcut: write ``{step: {name: value}}`` (one mode), the end marker, open the trial."""
    kit = TrialKit(where, collections=collections).steps(data, mode=mode)
    if end:
        kit.end()
    return kit.trial()


def write_workers(
    data: list[Mapping[int, Mapping[str, Any]]],
    *,
    modes: Mapping[int, ModeKeys] | None = None,
    mode: ModeKeys = ModeKeys.GLOBAL,
    where: ObjectStore | str | os.PathLike[str] | None = None,
    collections: Mapping[str, list[str] | str] | None = None,
    end: bool = True,
) -> Trial:
    """A multi-worker trial: ``worker_<i>`` writes ``data[i]`` ({step: {name: value}}), every
    collections file saying ``num_workers = len(data)``; steps are written in ascending order,
    each by every worker that has it (worker_0 first), in ``modes[step]`` (default ``mode``)."""
    first = TrialKit(where, collections=collections, worker="worker_0", num_workers=len(data))
    kits = [first] + [TrialKit(first.store, collections=collections, worker=f"worker_{i}",
                               num_workers=len(data)) for i in range(1, len(data))]
    for s in sorted(set().union(*(d.keys() for d in data))):
        for kit, d in zip(kits, data, strict=True):
            if s in d:
                kit.step(s, d[s], mode=(modes or {}).get(s, mode))
    if end:
        first.end()
    return first.trial()


def run_rule(rule: Any, steps: list[int] | None = None) -> int | None:
    """Evaluate ``rule`` (with :meth:`Rule.evaluate`) over ``steps`` (default: every global step
    of its base trial) and return the first step where it fired, or None.

    Steps where a required tensor is missing are skipped, as smdebug's ``invoke_rule`` does.
    """
    for s in rule.base_trial.steps() if steps is None else steps:
        try:
            if rule.evaluate(s):
                return int(s)
        except (TensorUnavailableForStep, StepUnavailable, TensorUnavailable):
            continue
    return None
