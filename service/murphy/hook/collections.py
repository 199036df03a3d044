"""The hook's collections: defaults, what is included, what is due at a step, and how to save it.

Decisions are cached per tensor name and per set of due collections, so the per-tensor cost on
the training thread is a dict lookup once the first step has been seen. :meth:`HookCollections.next_due`
gives the next step at which anything is due, so the hook skips the steps in between in O(1);
every cached decision (the hook's per-name save decisions too) is dropped by :meth:`invalidate`,
which bumps :attr:`HookCollections.generation` for the caches the adapters keep.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from murphy.core.collection import (
    NON_HISTOGRAM_COLLECTIONS,
    NON_REDUCTION_COLLECTIONS,
    Collection,
    CollectionKeys,
)
from murphy.core.modes import ModeKeys
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig, SaveConfigMode

# PyTorch's regexes (smdebug/pytorch/collection.py semantics).
PYTORCH_COLLECTION_REGEXES: Mapping[str, tuple[str, ...]] = {
    CollectionKeys.ALL: (),
    CollectionKeys.DEFAULT: (),
    CollectionKeys.WEIGHTS: ("^(?!gradient).*weight",),
    CollectionKeys.BIASES: ("^(?!gradient).*bias",),
    CollectionKeys.GRADIENTS: ("^gradient",),
    CollectionKeys.LOSSES: ("[Ll]oss_(?!input).*output",),
}
# Names that exist on demand (``get_collection`` / ``include_collections``) with these regexes.
KNOWN_COLLECTION_REGEXES: Mapping[str, tuple[str, ...]] = {
    CollectionKeys.INPUTS: (r"_input_\d+$",),
    CollectionKeys.OUTPUTS: (r"_output_\d+$",),
    CollectionKeys.OPTIMIZER_VARIABLES: (),
    "relu_output": (".*relu_output",),
    "relu_input": (".*relu_input",),
}
DEFAULT_INCLUDE_COLLECTIONS = (CollectionKeys.LOSSES,)
# smdebug never saves these outside TRAIN/GLOBAL.
TRAIN_ONLY_COLLECTIONS = frozenset({CollectionKeys.GRADIENTS, CollectionKeys.OPTIMIZER_VARIABLES})


@dataclass(frozen=True)
class SavePlan:
    """How to save one tensor at one step: raw or not, shape or not, which reductions."""

    save_raw: bool
    save_shape: bool
    reductions: tuple[tuple[str, bool], ...]

    @property
    def empty(self) -> bool:
        return not (self.save_raw or self.save_shape or self.reductions)


class HookCollections:
    """The collection manager of one hook."""

    def __init__(
        self,
        save_config: SaveConfig,
        reduction_config: ReductionConfig,
        regexes: Mapping[str, tuple[str, ...]] = PYTORCH_COLLECTION_REGEXES,
    ) -> None:
        self.save_config = save_config
        self.reduction_config = reduction_config
        self.collections: dict[str, Collection] = {
            name: Collection(name, include_regex=rx) for name, rx in regexes.items()
        }
        self.included: set[str] = set(DEFAULT_INCLUDE_COLLECTIONS)
        self._match_cache: dict[str, tuple[str, ...]] = {}
        self._plan_cache: dict[tuple[str, ...], SavePlan] = {}
        self._save_configs: dict[str, SaveConfig] = {}
        # The hook's decision per tensor name while ``save_plans_due`` are the due collections
        # (False: not saved). BaseHook._save reads both inline (the per-tensor cost of a step) and
        # fills misses with :meth:`save_plan`; :meth:`invalidate` clears them with the rest.
        self.save_plans: dict[str, SavePlan | Literal[False]] = {}
        self.save_plans_due: frozenset[str] = frozenset()
        # Bumped whenever a cached decision may be stale; the hook compares it to skip steps.
        self.generation = 0
        # Called on every invalidation: the hook stops skipping steps without looking.
        self.on_invalidate: Callable[[], None] | None = None

    def get(self, name: str) -> Collection:
        """The collection ``name``, created (with a known regex if it has one) when missing."""
        coll = self.collections.get(name)
        if coll is None:
            coll = Collection(name, include_regex=KNOWN_COLLECTION_REGEXES.get(name, ()))
            self.collections[name] = coll
        # The caller may mutate it: forget every cached decision.
        self.invalidate()
        return coll

    def include(self, names: Iterable[str]) -> None:
        """Make collections candidates for saving (creating them if needed)."""
        for name in names:
            self.get(name)
            self.included.add(name)
        self.invalidate()

    def invalidate(self) -> None:
        """Drop cached matches, plans, save decisions and effective save configs."""
        self._match_cache.clear()
        self._plan_cache.clear()
        self._save_configs.clear()
        self.save_plans.clear()
        self.generation += 1
        if self.on_invalidate is not None:
            self.on_invalidate()

    def set_save_plans_due(self, due: frozenset[str]) -> None:
        """Decide for ``due`` from now on: the decisions made for other due collections go."""
        self.save_plans.clear()
        self.save_plans_due = due

    def save_plan(self, tensor_name: str) -> SavePlan | Literal[False]:
        """How ``tensor_name`` is saved while ``save_plans_due`` are due (False: not at all),
        remembered in ``save_plans``; the due collections that save it record the name."""
        due_now = self.save_plans_due
        due = tuple(c for c in self.matching(tensor_name) if c in due_now)
        plan = self.save_plans[tensor_name] = self.plan(due) if due else False
        for cname in due:
            self.collections[cname].add_tensor_name(tensor_name)
        return plan

    def effective_save_config(self, name: str) -> SaveConfig:
        """The collection's own save config over the hook's (unset modes inherit)."""
        cfg = self._save_configs.get(name)
        if cfg is None:
            own = self.collections[name].save_config
            cfg = self.save_config if own is None else own.merge_default(self.save_config)
            self._save_configs[name] = cfg
        return cfg

    def due(self, mode: ModeKeys, mode_step: int) -> frozenset[str]:
        """The included collections saved at ``mode_step`` of ``mode``."""
        skip_train_only = _eval_like(mode)
        out: set[str] = set()
        for name in self.included:
            if skip_train_only and name in TRAIN_ONLY_COLLECTIONS:
                continue
            if self.effective_save_config(name).should_save_step(mode, mode_step):
                out.add(name)
        return frozenset(out)

    def next_due(self, mode: ModeKeys, mode_step: int) -> int | None:
        """The first step ``>= mode_step`` of ``mode`` at which :meth:`due` is not empty (None: never)."""
        skip_train_only = _eval_like(mode)
        best: int | None = None
        for name in self.included:
            if skip_train_only and name in TRAIN_ONLY_COLLECTIONS:
                continue
            step = next_save_step(self.effective_save_config(name).get_save_config(mode), mode_step)
            if step is not None and (best is None or step < best):
                best = step
        return best

    def schedule(self, mode: ModeKeys, mode_step: int) -> tuple[frozenset[str], int | None]:
        """``(due(mode, mode_step), next_due(mode, mode_step + 1))`` in one pass over the included
        collections (a step start needs both)."""
        skip_train_only = _eval_like(mode)
        due: list[str] = []
        best: int | None = None
        after = mode_step + 1
        for name in self.included:
            if skip_train_only and name in TRAIN_ONLY_COLLECTIONS:
                continue
            cfg = self.effective_save_config(name).get_save_config(mode)
            if cfg.should_save_step(mode_step):
                due.append(name)
            step = next_save_step(cfg, after)
            if step is not None and (best is None or step < best):
                best = step
        return frozenset(due), best

    def matching(self, tensor_name: str) -> tuple[str, ...]:
        """The included collections ``tensor_name`` belongs to (sorted, cached)."""
        hit = self._match_cache.get(tensor_name)
        if hit is None:
            hit = tuple(
                sorted(n for n in self.included if self.collections[n].matches(tensor_name))
            )
            self._match_cache[tensor_name] = hit
        return hit

    def plan(self, colls: tuple[str, ...]) -> SavePlan:
        """Union of the reduction configs of ``colls`` (a sorted tuple of due collections)."""
        plan = self._plan_cache.get(colls)
        if plan is None:
            plan = self._make_plan(colls)
            self._plan_cache[colls] = plan
        return plan

    def _make_plan(self, colls: tuple[str, ...]) -> SavePlan:
        raw = shape = False
        items: list[tuple[str, bool]] = []
        scalar = any(c in NON_REDUCTION_COLLECTIONS for c in colls)
        for name in colls:
            cfg = self.collections[name].reduction_config or self.reduction_config
            raw = raw or cfg.save_raw_tensor
            shape = shape or cfg.save_shape
            for item in cfg.reduction_items():
                if item not in items:
                    items.append(item)
        if scalar:
            # Scalars are always saved raw and never reduced.
            return SavePlan(save_raw=True, save_shape=shape, reductions=())
        order = {(op, a): i for i, (op, a) in enumerate(_write_order(items))}
        return SavePlan(raw, shape, tuple(sorted(items, key=lambda it: order[it])))

_RAW_ONLY = ReductionConfig(save_raw_tensor=True)


def collections_json_bytes(colls: HookCollections, num_workers: int) -> bytes:
    """The collections file: every known collection with its effective configs filled in.

    Written once per hook, at the round after the first save: serialised straight from the
    hook's collections and configs (no document objects built), each distinct config once: the
    bytes of the :class:`~murphy.core.collection.CollectionsDoc` of those collections.
    """
    memo: dict[int, Any] = {}

    def config_json(cfg: SaveConfig | ReductionConfig | None) -> Any:
        if cfg is None:
            return None
        hit = memo.get(id(cfg))
        if hit is None:
            hit = memo[id(cfg)] = cfg.to_json_dict()
        return hit

    out: dict[str, Any] = {}
    for name, coll in colls.collections.items():
        # smdebug's rule, whatever the user set: scalar and summary collections are saved raw,
        # unreduced, and without histograms.
        reduction = _RAW_ONLY if name in NON_REDUCTION_COLLECTIONS else coll.reduction_config or colls.reduction_config
        # Collection.to_json_dict's keys, in its order.
        out[name] = {
            "name": name,
            "include_regex": list(coll.include_regex),
            "tensor_names": sorted(coll.tensor_names),
            "reduction_config": config_json(reduction),
            "save_config": config_json(colls.effective_save_config(name)),
            "save_histogram": coll.save_histogram and name not in NON_HISTOGRAM_COLLECTIONS,
        }
    return json.dumps({"collections": out, "_meta": {"num_workers": num_workers}}).encode()


def next_save_step(cfg: SaveConfigMode, step: int) -> int | None:
    """The first step ``>= step`` that ``cfg.should_save_step`` accepts (None: none ever)."""
    best: int | None = None
    steps = cfg.save_steps  # sorted
    if steps:
        i = bisect_left(steps, step)
        if i < len(steps):
            best = steps[i]
    first = max(step, cfg.start_step)
    # The interval is not offset by start_step: the next multiple of it at or after ``first``.
    nxt = -(-first // cfg.save_interval) * cfg.save_interval
    if (cfg.end_step is None or nxt < cfg.end_step) and (best is None or nxt < best):
        best = nxt
    return best


def _eval_like(mode: ModeKeys) -> bool:
    """EVAL or PREDICT (identity first: ``==`` on a mode is a Python call)."""
    if mode is ModeKeys.EVAL or mode is ModeKeys.PREDICT:
        return True
    return type(mode) is not ModeKeys and mode in (ModeKeys.EVAL, ModeKeys.PREDICT)


def _write_order(items: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """smdebug's write order: reductions, norms, abs reductions, abs norms."""
    norms = ("l1", "l2")

    def rank(item: tuple[str, bool]) -> int:
        op, is_abs = item
        return (2 if is_abs else 0) + (1 if op in norms else 0)

    return sorted(items, key=rank)
