"""Collections: named groups of tensors with their own save and reduction configs.

The collections file (``collections/000000000/<worker>_collections.json``) is
``{"collections": {name: Collection}, "_meta": {"num_workers": N}}`` exactly as smdebug writes
it; :class:`CollectionsDoc` reads and writes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig
from murphy.exceptions import CorruptCollections, InvalidCollectionConfiguration, MurphyError


class CollectionKeys:
    """smdebug's built-in collection names."""

    DEFAULT = "default"
    ALL = "all"
    INPUTS = "inputs"
    OUTPUTS = "outputs"
    WEIGHTS = "weights"
    GRADIENTS = "gradients"
    LOSSES = "losses"
    BIASES = "biases"
    LAYERS = "layers"
    SM_METRICS = "sm_metrics"
    OPTIMIZER_VARIABLES = "optimizer_variables"
    TENSORFLOW_SUMMARIES = "tensorflow_summaries"
    METRICS = "metrics"
    # XGBoost
    HYPERPARAMETERS = "hyperparameters"
    PREDICTIONS = "predictions"
    LABELS = "labels"
    FEATURE_IMPORTANCE = "feature_importance"
    AVERAGE_SHAP = "average_shap"
    FULL_SHAP = "full_shap"
    TREES = "trees"


# Scalars are never reduced and get no histograms.
SCALAR_COLLECTIONS: frozenset[str] = frozenset(
    {
        CollectionKeys.LOSSES,
        CollectionKeys.METRICS,
        CollectionKeys.FEATURE_IMPORTANCE,
        CollectionKeys.AVERAGE_SHAP,
        CollectionKeys.SM_METRICS,
    }
)
SUMMARIES_COLLECTIONS: frozenset[str] = frozenset({CollectionKeys.TENSORFLOW_SUMMARIES})
SM_METRIC_COLLECTIONS: frozenset[str] = frozenset(
    {CollectionKeys.LOSSES, CollectionKeys.METRICS, CollectionKeys.SM_METRICS}
)
NON_REDUCTION_COLLECTIONS: frozenset[str] = SCALAR_COLLECTIONS | SUMMARIES_COLLECTIONS
NON_HISTOGRAM_COLLECTIONS: frozenset[str] = SCALAR_COLLECTIONS | SUMMARIES_COLLECTIONS


def _str_list(value: Iterable[str] | str | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


class Collection:
    """A named set of tensors: explicit ``tensor_names`` plus ``include_regex`` patterns.

    A tensor belongs to the collection if its name is in ``tensor_names`` or any regex matches
    it with ``re.search`` (a substring match, as in smdebug). ``reduction_config`` and
    ``save_config`` are None when the collection uses the hook's. An invalid regex raises
    :class:`InvalidCollectionConfiguration`.
    """

    def __init__(
        self,
        name: str,
        include_regex: Iterable[str] | str = (),
        tensor_names: Iterable[str] | str = (),
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | None = None,
        save_histogram: bool = True,
    ) -> None:
        self.name = name
        self.include_regex: list[str] = []
        self.tensor_names: set[str] = set(_str_list(tensor_names))
        self.reduction_config = reduction_config
        self.save_config = save_config
        self.save_histogram = save_histogram
        self._patterns: dict[str, re.Pattern[str]] = {}
        self.include(include_regex)

    def __repr__(self) -> str:
        return (
            f"Collection(name={self.name!r}, include_regex={self.include_regex!r}, "
            f"tensor_names={sorted(self.tensor_names)!r}, reduction_config={self.reduction_config!r}, "
            f"save_config={self.save_config!r}, save_histogram={self.save_histogram!r})"
        )

    def include(self, regex: Iterable[str] | str) -> None:
        """Add one regex or several (duplicates ignored)."""
        for r in _str_list(regex):
            if r in self._patterns:
                continue
            try:
                self._patterns[r] = re.compile(r)
            except re.error as exc:
                raise InvalidCollectionConfiguration(
                    f"collection {self.name!r}: bad regex {r!r}: {exc}"
                ) from exc
        self.include_regex = list(self._patterns)

    def add_tensor_name(self, name: str) -> None:
        """Add an explicit tensor name."""
        self.tensor_names.add(name)

    def has_tensor_name(self, name: str) -> bool:
        """True if ``name`` was added explicitly."""
        return name in self.tensor_names

    def matches(self, name: str) -> bool:
        """True if ``name`` is an explicit member or any regex ``re.search``-matches it."""
        if name in self.tensor_names:
            return True
        return any(p.search(name) is not None for p in self._patterns.values())

    def to_json_dict(self) -> dict[str, Any]:
        """The smdebug JSON object (``tensor_names`` sorted, configs null when unset)."""
        return {
            "name": self.name,
            "include_regex": list(self.include_regex),
            "tensor_names": sorted(self.tensor_names),
            "reduction_config": None if self.reduction_config is None else self.reduction_config.to_json_dict(),
            "save_config": None if self.save_config is None else self.save_config.to_json_dict(),
            "save_histogram": self.save_histogram,
        }

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> Collection:
        """Inverse of :meth:`to_json_dict`; raises :class:`CorruptCollections` on a bad shape."""
        if not isinstance(d, Mapping) or not isinstance(d.get("name"), str):
            raise CorruptCollections(f"a collection must be an object with a string 'name', got {d!r:.200}")
        try:
            red = d.get("reduction_config")
            save = d.get("save_config")
            hist = d.get("save_histogram", True)
            if not isinstance(hist, bool):
                raise CorruptCollections(f"save_histogram must be a boolean, got {hist!r}")
            return cls(
                name=d["name"],
                include_regex=_checked_strings(d.get("include_regex"), "include_regex"),
                tensor_names=_checked_strings(d.get("tensor_names"), "tensor_names"),
                reduction_config=None if red is None else ReductionConfig.from_json_dict(red),
                save_config=None if save is None else SaveConfig.from_json_dict(save),
                save_histogram=hist,
            )
        except CorruptCollections:
            raise
        except (MurphyError, TypeError, ValueError) as exc:
            raise CorruptCollections(f"collection {d.get('name')!r} is malformed: {exc}") from exc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Collection):
            return NotImplemented
        return self.to_json_dict() == other.to_json_dict()

    __hash__ = None  # type: ignore[assignment]  # mutable


def _checked_strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CorruptCollections(f"{what} must be a list of strings, got {value!r:.200}")
    return value


@dataclass
class CollectionsDoc:
    """The contents of one worker's collections file."""

    collections: dict[str, Collection]
    num_workers: int = 1

    def to_json_dict(self) -> dict[str, Any]:
        """``{"collections": {name: {...}}, "_meta": {"num_workers": N}}``."""
        return {
            "collections": {name: c.to_json_dict() for name, c in self.collections.items()},
            "_meta": {"num_workers": self.num_workers},
        }

    def to_json_bytes(self) -> bytes:
        """The file's bytes (UTF-8 JSON)."""
        return json.dumps(self.to_json_dict()).encode("utf-8")

    @classmethod
    def from_json_bytes(cls, data: bytes) -> CollectionsDoc:
        """Parse a collections file; raises :class:`CorruptCollections` with the reason on bad input."""
        try:
            doc = json.loads(data)
        except (UnicodeDecodeError, ValueError) as exc:
            raise CorruptCollections(f"collections file is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("collections"), dict):
            raise CorruptCollections("collections file has no 'collections' object")
        meta = doc.get("_meta")
        if not isinstance(meta, dict):
            raise CorruptCollections("collections file has no '_meta' object")
        workers = meta.get("num_workers")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise CorruptCollections(f"_meta.num_workers must be a positive integer, got {workers!r}")
        colls = {name: Collection.from_json_dict(c) for name, c in doc["collections"].items()}
        return cls(collections=colls, num_workers=workers)
