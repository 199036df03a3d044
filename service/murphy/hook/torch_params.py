"""The parameters' save decisions of a PyTorch hook's step, replayed while its save key holds.

A saving step starts by deciding, for every registered parameter, whether and how it is saved;
under an unchanged save key (murphy.hook.callback_plan: collections' generation, due
collections, mode) those decisions are the same at every step. So the first step's are kept and
replayed: parameters not saved are skipped, raw-only ones are handed to the copier directly, and
everything else (reductions, shapes only, a parameter that moved off the CPU or became bfloat16,
a name not deferred yet) takes the hook's full path. That per-tensor cost sits on the training
thread at every saving step (benchmarks/writer_thread_share.py).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

import torch

from murphy.hook.torch_backend import TorchBackend
from murphy.hook.torch_deferred import DeferredCopies
from murphy.hook.writer import Record

#: (name, parameter, may go straight to the copier, save the shape)
Entry = tuple[str, torch.nn.Parameter, bool, bool]


class ParamPlan:
    """The replayed decisions of one hook (see the module docs)."""

    def __init__(self) -> None:
        self._key: Hashable | None = None
        self._entries: list[Entry] | None = None

    def invalidate(self) -> None:
        """Forget the decisions (a parameter was registered)."""
        self._key, self._entries = None, None

    def save(self, key: Hashable, params: list[tuple[str, torch.nn.Parameter]], deferred: DeferredCopies | None,
             save: Callable[[str, Any], None], records: list[Record], plans: Mapping[str, Any]) -> None:
        """Save ``params`` for a step under ``key``: through ``save`` (the hook's full path), or
        replaying the decisions that ``plans`` (the collections' per-name plans) held after the
        first step under ``key``."""
        entries = self._entries
        if deferred is None or entries is None or self._key != key:
            for name, param in params:
                save(name, param)
            if deferred is not None:
                self._key, self._entries = key, _entries(params, plans)
            return
        defer, wants = deferred.defer, deferred.wants
        for name, param, fast, shape in entries:
            if fast and param.is_cpu and param.dtype is not torch.bfloat16 and wants(name):
                records.append(Record(name, defer(name, param), tuple(param.shape) if shape else None))
            else:
                save(name, param)


def _entries(params: list[tuple[str, torch.nn.Parameter]], plans: Mapping[str, Any]) -> list[Entry]:
    out: list[Entry] = []
    for name, param in params:
        plan = plans.get(name)
        if plan is None or (plan and param.numel() == 0):
            out.append((name, param, False, False))  # undecided or empty: the full path
        elif plan:  # False: not saved under this key
            fast = plan.save_raw and not plan.reductions and TorchBackend.deferrable(param)
            out.append((name, param, fast, plan.save_shape))
    return out
