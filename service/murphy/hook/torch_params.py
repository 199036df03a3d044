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

import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Literal

import torch

from murphy.hook.guard import LOGGER_NAME
from murphy.hook.torch_backend import TorchBackend
from murphy.hook.torch_deferred import DeferredCopies
from murphy.hook.writer import Record

_log = logging.getLogger(LOGGER_NAME)

#: A name's replayed decision: (may go straight to the copier, save the shape), or False: not
#: saved under this save key.
Decision = tuple[bool, bool] | Literal[False]
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
        _replay(entries, deferred, save, records)


class GradPlan:
    """A backward pass's deferred gradients, saved from ``param.grad`` in one pass at its end.

    A gradient that lands in a ``param.grad`` which was None holds exactly that gradient once
    accumulated (AccumulateGrad steals or clones it; holding the hook's tensor would force the
    clone), so the tensor hook only notes ``(name, parameter)`` in :attr:`fresh` and the
    backward's end saves them all, replaying per name the decisions the first step under a save
    key made (which parameters got a fresh gradient can vary). Names still being learned are
    copied at their hook and noted in :attr:`watch`, to be probed in ``param.grad`` (what
    ``clip_grad_norm_`` changes). A gradient that never reaches ``param.grad``
    (``torch.autograd.grad``) joins :attr:`at_hook`: copied at its hook from then on.
    """

    def __init__(self) -> None:
        self._key: Hashable | None = None
        # name -> its Decision (the full path until one is known).
        self._decisions: dict[str, Decision] = {}
        self.fresh: list[tuple[str, torch.nn.Parameter]] = []
        self.watch: list[tuple[str, torch.nn.Parameter]] = []
        self.at_hook: set[str] = set()

    def invalidate(self) -> None:
        """Forget the decisions (a parameter was registered)."""
        self._key, self._decisions = None, {}

    def clear(self) -> None:
        """Drop what this backward noted (a new step, or nothing saved)."""
        self.fresh.clear()
        self.watch.clear()

    def end_backward(self, key: Hashable, deferred: DeferredCopies, save: Callable[[str, Any], None],
                     records: list[Record], plans: Mapping[str, Any], step: int) -> None:
        """Probe the watched gradients, then save each fresh ``param.grad`` under its name:
        through ``save`` (the hook's full path) the first time under ``key``, then replaying what
        ``plans`` (the collections' per-name plans) decided."""
        watch, fresh = self.watch[:], self.fresh[:]
        self.clear()
        for name, param in watch:
            if param.grad is None:  # torch.autograd.grad(): no param.grad to defer from
                self.at_hook.add(name)
            else:
                deferred.probe(name, param.grad)
        if self._key != key:
            self._key, self._decisions = key, {}
        decisions = self._decisions
        replayed: list[tuple[str, torch.Tensor, bool, bool]] = []
        for name, param in fresh:
            grad = param.grad
            if grad is None:
                self._missed(name, step)
                continue
            decision = decisions.get(name)
            if decision is None:
                save(name, grad)
                decision = _decide(plans.get(name), grad)
                if decision is not None:
                    decisions[name] = decision
            elif decision is not False:
                replayed.append((name, grad, *decision))
        _replay(replayed, deferred, save, records)

    def _missed(self, name: str, step: int) -> None:
        # A deferred gradient that never reached param.grad (torch.autograd.grad after the
        # learning steps): not written this once (never a wrong value), copied at its hook after.
        self.at_hook.add(name)
        _log.warning("murphy hook: %s was computed without reaching param.grad (torch.autograd.grad?); it "
                     "is not written for step %d and is copied in its tensor hook from now on", name, step)


def _decide(plan: Any, value: torch.Tensor) -> Decision | None:
    """What the full path decided for ``value`` under the collections' ``plan`` for its name:
    None while undecided or for an empty tensor (it keeps the full path), False when not saved."""
    if plan is None or (plan and value.numel() == 0):
        return None
    if not plan:
        return False
    return plan.save_raw and not plan.reductions and TorchBackend.deferrable(value), plan.save_shape


def _replay(items: Iterable[tuple[str, torch.Tensor, bool, bool]], deferred: DeferredCopies,
            save: Callable[[str, Any], None], records: list[Record]) -> None:
    """Replayed decisions, ``(name, value, may go straight to the copier, save the shape)``:
    straight to the copier while the value still can go there (it may have moved off the CPU or
    changed dtype or layout since), else the hook's full path. One loop for all of a step's
    values: it runs in every saving step."""
    defer, wants = deferred.defer, deferred.wants
    for name, value, fast, shape in items:
        if fast and value.is_cpu and value.dtype is not torch.bfloat16 and value.layout is torch.strided \
                and wants(name):
            records.append(Record(name, defer(name, value), tuple(value.shape) if shape else None))
        else:
            save(name, value)


def _entries(params: list[tuple[str, torch.nn.Parameter]], plans: Mapping[str, Any]) -> list[Entry]:
    out: list[Entry] = []
    for name, param in params:
        decision = _decide(plans.get(name), param)
        if decision is None:
            out.append((name, param, False, False))  # undecided or empty: the full path
        elif decision:  # False: not saved under this key
            out.append((name, param, *decision))
    return out
