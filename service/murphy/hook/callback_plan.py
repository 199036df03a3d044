"""Which per-tensor callbacks a saving step of a module-based hook needs.

A forward hook costs even when it saves nothing: a module with one leaves torch's fast call path
and re-enters Python at every call (about 15-20 µs per module per step on the writer benchmark's
CNN, benchmarks/writer_throughput.py), and with several cores that time sits on the training
thread. So a hook learns, for each *save key* (the collections' generation, the due collections
and the mode), which modules' inputs and outputs can be saved at all, in the first saving step
under that key (the learning step, where every module is hooked), and from then on hooks only
the others.

A module is left out only when the learning step called it and no name it could produce matched
a due collection: its ``<name>_input_<i>`` / ``<name>_output_<i>`` for every index it had and at
least the first :data:`INDEX_PROBE`. Modules the learning step did not call (a branch taken
sometimes) stay hooked, and any change to the collections makes a new key, learned again. Gradient
hooks need no learning: their names are known, so :meth:`CallbackPlan.may_save` decides them.
"""

from __future__ import annotations

from collections.abc import Hashable

from murphy.hook.collections import HookCollections

#: Input/output indices probed for a module beyond those it had in the learning step.
INDEX_PROBE = 16

#: Learned keys kept; a script that changes its collections at every step learns every step.
MAX_KEYS = 64


class CallbackPlan:
    """The learned silent modules per save key (see the module docs)."""

    def __init__(self, colls: HookCollections) -> None:
        self._colls = colls
        self._silent_by_key: dict[tuple[int, frozenset[str], Hashable], frozenset[int]] = {}
        self._learning: tuple[int, frozenset[str], Hashable] | None = None
        self._seen: set[int] = set()
        self._silent: set[int] = set()

    def key(self, due: frozenset[str], mode: Hashable) -> tuple[int, frozenset[str], Hashable]:
        """The save key of a step whose due collections are ``due`` in ``mode``."""
        return (self._colls.generation, due, mode)

    @property
    def learning(self) -> bool:
        """True while a learning step has observed at least one module (it can be finished)."""
        return self._learning is not None and bool(self._seen)

    def silent(self, key: tuple[int, frozenset[str], Hashable]) -> frozenset[int]:
        """Ids of the modules that need no forward hook under ``key``; an unlearned key starts
        learning (every module hooked, nothing silent)."""
        self.finish()
        known = self._silent_by_key.get(key)
        if known is not None:
            return known
        self._learning = key
        return frozenset()

    def may_save(self, due: frozenset[str], name: str) -> bool:
        """Whether a tensor called ``name`` belongs to a due collection (no side effects: the
        hook's own save decision records saved names in their collections)."""
        return any(c in due for c in self._colls.matching(name))

    def observe(self, module_id: int, name: str, n_inputs: int, n_outputs: int, due: frozenset[str]) -> None:
        """A hooked module ran during the learning step (no-op outside it or after its first call)."""
        if self._learning is None or module_id in self._seen:
            return
        self._seen.add(module_id)
        probe = range(max(INDEX_PROBE, n_inputs, n_outputs))
        if not any(self.may_save(due, f"{name}_{kind}_{i}") for kind in ("input", "output") for i in probe):
            self._silent.add(module_id)

    def finish(self) -> None:
        """End the learning step, keeping what it found (nothing if no module ran yet)."""
        if self._learning is None or not self._seen:
            return
        if len(self._silent_by_key) >= MAX_KEYS:
            self._silent_by_key.clear()
        self._silent_by_key[self._learning] = frozenset(self._silent)
        self._learning = None
        self._seen.clear()
        self._silent.clear()
