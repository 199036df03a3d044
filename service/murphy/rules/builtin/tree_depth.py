"""TreeDepth: XGBoost's trees stop growing before the expected depth."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.rules.builtin._common import Array, fmt, reject_unknown, require, step_label, value_at
from murphy.rules.builtin._workers import EveryWorker
from murphy.rules.params import as_float

_ACCEPTED = ("depth",)
_NODE = re.compile(r"(^|/)trees/Node$")


def node_depth(node_id: int) -> int:
    """Depth of a node numbered breadth-first from the root 0: ``floor(log2(node_id + 1))``."""
    return (int(node_id) + 1).bit_length() - 1


class TreeDepth(EveryWorker):
    """Fires at the first step where the deepest tree saved at that step is shallower than
    ``depth``.

    The XGBoost hook saves the trees of each boosting round as ``trees/<column>`` (the columns
    of ``trees_to_dataframe``), one row per node; ``trees/Node`` is each node's id within its
    tree and ``trees/Tree`` (optional here) its tree. XGBoost numbers nodes breadth-first from
    0, so a tree's depth is ``floor(log2(largest node id + 1))``: exact for a complete tree
    (depth 2 → ids 0..6), a lower bound for a lopsided one. AWS's definition is "the base 2
    logarithm of the largest node ID"; the ``+ 1`` and the floor make a root-only tree depth 0
    and a complete depth-``d`` tree depth ``d``.

    The condition: XGBoost rejects splits that do not reduce the loss enough (``gamma``,
    ``min_child_weight`` ...), so its trees can stop short of ``max_depth``. AWS never published
    the comparison; murphy fires when ``max over the step's trees of depth < depth``: even the
    deepest tree of the round did not reach the expected depth, i.e. splitting is being
    rejected (over-regularised or nothing left to learn). Trees deeper than ``depth`` never fire.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str | Sequence[Any] | None = "",
        other_trials: Sequence[Any] | None = None,
        *,
        depth: Any = "4",
        **extra: Any,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        name = self.rule_name
        reject_unknown(name, extra, _ACCEPTED)
        self.depth = as_float(depth, "depth", name)
        require(self.depth >= 0, name, "depth", depth, ">= 0")

    @staticmethod
    def tree_depths(nodes: Array, trees: Array | None) -> dict[int, int]:
        """``{tree: depth}`` from the node ids (and tree ids, same length) of one step."""
        node_ids = np.asarray(nodes).astype(np.int64).reshape(-1)
        if trees is None or np.asarray(trees).size != node_ids.size:
            tree_ids = np.zeros_like(node_ids)
        else:
            tree_ids = np.asarray(trees).astype(np.int64).reshape(-1)
        depths: dict[int, int] = {}
        for tree in np.unique(tree_ids).tolist():
            largest = int(node_ids[tree_ids == tree].max())
            depths[int(tree)] = node_depth(max(largest, 0))
        return depths

    def invoke_worker_step(self, step: int) -> bool:
        for tname in self.base_trial.tensor_names(step=step):
            if not _NODE.search(tname):
                continue
            nodes = value_at(self.base_trial, tname, step)
            if nodes is None or not nodes.size:
                continue
            tree_name = tname[: -len("Node")] + "Tree"
            trees = value_at(self.base_trial, tree_name, step) if self.base_trial.has_tensor(tree_name) else None
            depths = self.tree_depths(nodes, trees)
            tree, deepest = max(depths.items(), key=lambda kv: (kv[1], -kv[0]))
            if deepest < self.depth:
                return self.found(
                    step,
                    f"the deepest of the {len(depths)} tree(s) in {tname!r} at "
                    f"{step_label(self.base_trial, step)} (tree {tree}) has depth {deepest} "
                    f"(largest node id in the round: {int(np.asarray(nodes).max())}) < depth "
                    f"{fmt(self.depth)}: XGBoost stops splitting early",
                    tensor=tname, value=float(deepest),
                )
        return False
