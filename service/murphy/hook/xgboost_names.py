"""What murphy's XGBoost hook writes, without importing xgboost: smdebug's collections and their
regexes, metric names from ``evals_log``, and the tree table parsed from a text dump.

Everything here is pure Python/numpy so that the rules, the built-in algorithm and the tests can
use the names and the parser without the framework; ``murphy.hook.xgboost`` is the only hook
module that imports xgboost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from murphy.core.collection import CollectionKeys

# smdebug's XGBoost collections (smdebug/xgboost/collection.py), regexes copied verbatim, bugs
# included: they are written into the collections file and smdebug's trial matches names
# against them, so changing them would change which tensors a collection holds for its readers.
# ``[a-zA-z]`` (sic) also matches ``[\]^_`` and the SHAP regexes' ``[^/bias]`` is a character
# class; murphy adds the names the class would wrongly drop to ``tensor_names`` (see the hook).
XGBOOST_COLLECTION_REGEXES: Mapping[str, tuple[str, ...]] = {
    CollectionKeys.ALL: (),
    CollectionKeys.DEFAULT: (),
    CollectionKeys.HYPERPARAMETERS: ("^hyperparameters/.*$",),
    CollectionKeys.METRICS: ("^[a-zA-z]+-[a-zA-z0-9]+$",),
    CollectionKeys.LOSSES: ("^[a-zA-z]+-.+(?<!(auc|map))$",),
    CollectionKeys.PREDICTIONS: ("^predictions$",),
    CollectionKeys.LABELS: ("^labels$",),
    CollectionKeys.FEATURE_IMPORTANCE: ("^feature_importance/.*",),
    CollectionKeys.AVERAGE_SHAP: ("^average_shap/.*[^/bias]$",),
    CollectionKeys.FULL_SHAP: ("^full_shap/.*[^/bias]$",),
    CollectionKeys.TREES: ("^trees/.*",),
}
DEFAULT_INCLUDE_COLLECTIONS = (CollectionKeys.METRICS,)
# smdebug's XGBoost default: every 10th boosting round (0, 10, 20, ...), no "last round" save.
DEFAULT_SAVE_INTERVAL = 10
# Metrics that grow as the model improves: never written as losses.
INCREASING_METRICS_REGEX = re.compile(r"^[a-zA-z]+-(auc|map)$")
IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")
TREE_BOOSTERS = frozenset({"gbtree", "dart"})
TREE_COLUMNS = ("Tree", "Node", "ID", "Feature", "Split", "Yes", "No", "Missing", "Gain", "Cover", "Category")


def metric_name(eval_name: str, metric: str) -> str:
    """smdebug's tensor name of a metric: ``<eval>-<metric>`` (``validation-rmse``)."""
    return f"{eval_name}-{metric}"


def metric_items(evals_log: Mapping[str, Mapping[str, Sequence[Any]]]) -> list[tuple[str, Any]]:
    """``(<eval>-<metric>, latest value)`` for every metric of ``evals_log``.

    ``evals_log`` is xgboost's cumulative history; ``xgboost.cv`` logs ``(mean, std)`` tuples,
    which are written as a (2,) array as smdebug does.
    """
    out: list[tuple[str, Any]] = []
    for eval_name, results in evals_log.items():
        for metric, history in results.items():
            if len(history):
                out.append((metric_name(eval_name, metric), history[-1]))
    return out


def increasing_metric(name: str) -> bool:
    """A metric that grows as the model improves: ``auc``/``map`` (and ``aucpr``, ``ndcg``,
    ``pre``) after the last dash; the hook never adds such a name to ``losses``."""
    return name.rpartition("-")[2].split("@")[0] in ("auc", "aucpr", "map", "ndcg", "pre")


def as_array(value: Any) -> np.ndarray[Any, Any]:
    """smdebug's ``make_numpy_array``: scalars (and strings) become shape ``(1,)``."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bool, int, float, str, np.generic)):
        return np.array([value])
    if isinstance(value, (tuple, list)):
        return np.asarray(value)
    raise TypeError(f"cannot save a value of type {type(value).__name__}")


def booster_name(config_json: str) -> str:
    """The booster type (``gbtree``, ``gblinear``, ``dart``) from ``Booster.save_config()``.

    smdebug read ``model.booster``, an attribute xgboost's Booster has never had, so its guard
    never fired and gblinear models crashed on gain importance.
    """
    doc = json.loads(config_json)
    name = doc["learner"]["gradient_booster"]["name"]
    if not isinstance(name, str):
        raise ValueError(f"unexpected booster name {name!r}")
    return name


_NODE = re.compile(r"^\s*(\d+):(.*)$")


def _stats(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if sep:
            out[key] = value
    return out


def parse_tree_dump(dumps: Sequence[str], first_tree: int = 0) -> dict[str, np.ndarray[Any, Any]]:
    """``Booster.trees_to_dataframe()``'s columns, from ``get_dump(with_stats=True)`` text dumps.

    ``dumps[i]`` is tree ``first_tree + i``. Rows are sorted by (Tree, Node). Leaves carry the leaf
    value in ``Gain`` and NaN in ``Split``, ``'nan'`` in Yes/No/Missing/Category; a categorical
    split has NaN in ``Split`` and its categories, comma-separated, in ``Category``.
    """
    cols: dict[str, list[Any]] = {c: [] for c in TREE_COLUMNS}
    nan = float("nan")
    for offset, dump in enumerate(dumps):
        tree = first_tree + offset
        for line in dump.splitlines():
            m = _NODE.match(line)
            if m is None:
                continue
            node, rest = int(m.group(1)), m.group(2)
            cols["Tree"].append(tree)
            cols["Node"].append(node)
            if rest.startswith("["):
                cond, _, stats_text = rest[1:].partition("]")
                stats = _stats(stats_text)
                feature, split, category = _condition(cond)
                cols["Feature"].append(feature)
                cols["Split"].append(split)
                cols["Category"].append(category)
                cols["Yes"].append(f"{tree}-{stats['yes']}")
                cols["No"].append(f"{tree}-{stats['no']}")
                cols["Missing"].append(f"{tree}-{stats['missing']}")
                cols["Gain"].append(float(stats["gain"]))
            else:
                stats = _stats(rest)
                cols["Feature"].append("Leaf")
                cols["Split"].append(nan)
                cols["Category"].append("nan")
                for key in ("Yes", "No", "Missing"):
                    cols[key].append("nan")
                cols["Gain"].append(float(stats["leaf"]))
            cols["Cover"].append(float(stats.get("cover", nan)))
    trees = np.array(cols["Tree"], dtype=np.int64)
    nodes = np.array(cols["Node"], dtype=np.int64)
    order = np.lexsort((nodes, trees))
    out: dict[str, np.ndarray[Any, Any]] = {"Tree": trees[order], "Node": nodes[order]}
    out["ID"] = np.array([f"{t}-{n}" for t, n in zip(out["Tree"], out["Node"], strict=True)], dtype=np.str_)
    for key in ("Feature", "Yes", "No", "Missing", "Category"):
        out[key] = np.array(cols[key], dtype=np.str_)[order]
    for key in ("Split", "Gain", "Cover"):
        out[key] = np.array(cols[key], dtype=np.float64)[order]
    return {c: out[c] for c in TREE_COLUMNS}


def _condition(cond: str) -> tuple[str, float, str]:
    """``f0<0.5`` → (f0, 0.5, 'nan'); ``f1:{1,2}`` → (f1, NaN, '1,2'); an indicator ``f2`` → NaN."""
    if ":{" in cond:
        feature, _, cats = cond.partition(":{")
        return feature, float("nan"), cats.rstrip("}")
    feature, sep, value = cond.rpartition("<")
    if sep:
        return feature, float(value), "nan"
    return cond, float("nan"), "nan"
