"""What to save: smdebug's ``ReductionConfig`` (raw tensor, reductions, norms, shape).

The JSON form packs the four lists into one comma string, ``"min,max,abs_mean,l2_norm,
abs_l1_norm"``: an ``abs_`` prefix means "of the absolute value", a ``_norm`` suffix means a norm.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from murphy.exceptions import SMDebugValueError

ALLOWED_REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod")
ALLOWED_NORMS = ("l1", "l2")
REDUCTION_CONFIG_KEYS = ("reductions", "save_raw_tensor", "save_shape")


def _names(value: Iterable[str] | str | None, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str) or item not in allowed:
            raise SMDebugValueError(f"{what} {item!r} is not supported; allowed: {', '.join(allowed)}")
        if item not in out:
            out.append(item)
    return tuple(out)


def _strict_bool(value: Any, what: str) -> bool:
    # smdebug rejects "True"/"false" strings here; a silently truthy "false" would save raw tensors.
    if not isinstance(value, bool):
        raise SMDebugValueError(f"{what} must be a boolean, got {value!r}")
    return value


@dataclass(frozen=True)
class ReductionConfig:
    """Which reductions of a tensor to save, and whether to save the tensor itself and its shape.

    ``reductions``/``abs_reductions`` come from :data:`ALLOWED_REDUCTIONS`, ``norms``/``abs_norms``
    from :data:`ALLOWED_NORMS`; lists are kept as tuples in the order given, duplicates dropped.
    ``save_raw_tensor`` and ``save_shape`` must be real bools (:class:`SMDebugValueError` otherwise).
    """

    reductions: Sequence[str] = ()
    abs_reductions: Sequence[str] = ()
    norms: Sequence[str] = ()
    abs_norms: Sequence[str] = ()
    save_raw_tensor: bool = False
    save_shape: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "reductions", _names(self.reductions, ALLOWED_REDUCTIONS, "reduction"))
        object.__setattr__(
            self, "abs_reductions", _names(self.abs_reductions, ALLOWED_REDUCTIONS, "reduction")
        )
        object.__setattr__(self, "norms", _names(self.norms, ALLOWED_NORMS, "norm"))
        object.__setattr__(self, "abs_norms", _names(self.abs_norms, ALLOWED_NORMS, "norm"))
        _strict_bool(self.save_raw_tensor, "save_raw_tensor")
        _strict_bool(self.save_shape, "save_shape")

    @property
    def has_reductions(self) -> bool:
        """True if any reduction or norm is configured."""
        return bool(self.reductions or self.abs_reductions or self.norms or self.abs_norms)

    def reduction_items(self) -> list[tuple[str, bool]]:
        """``(op, abs)`` pairs in smdebug's write order: reductions, norms, abs reductions, abs norms.

        Norms are named ``l1``/``l2`` here (the stored tensor name has no ``_norm`` suffix).
        """
        return (
            [(r, False) for r in self.reductions]
            + [(n, False) for n in self.norms]
            + [(r, True) for r in self.abs_reductions]
            + [(n, True) for n in self.abs_norms]
        )

    def reductions_string(self) -> str:
        """The comma string of the JSON form, e.g. ``"min,l2_norm,abs_mean,abs_l1_norm"``."""
        # smdebug's order (verified against its CollectionManager.export)
        parts = [*self.reductions]
        parts += [f"{n}_norm" for n in self.norms]
        parts += [f"abs_{r}" for r in self.abs_reductions]
        parts += [f"abs_{n}_norm" for n in self.abs_norms]
        return ",".join(parts)

    @classmethod
    def from_reductions_string(
        cls, text: str, *, save_raw_tensor: bool = False, save_shape: bool = False
    ) -> ReductionConfig:
        """Parse ``"min,max,abs_mean,l2_norm,abs_l1_norm"`` (whitespace and empty items ignored)."""
        if not isinstance(text, str):
            raise SMDebugValueError(f"reductions must be a comma-separated string, got {text!r}")
        lists: dict[str, list[str]] = {"reductions": [], "abs_reductions": [], "norms": [], "abs_norms": []}
        for raw in text.split(","):
            item = raw.strip()
            if not item:
                continue
            is_abs = item.startswith("abs_")
            base = item[4:] if is_abs else item
            is_norm = base.endswith("_norm")
            base = base[: -len("_norm")] if is_norm else base
            key = ("abs_" if is_abs else "") + ("norms" if is_norm else "reductions")
            lists[key].append(base)
        return cls(**lists, save_raw_tensor=save_raw_tensor, save_shape=save_shape)

    def to_json_dict(self) -> dict[str, Any]:
        """``{"save_raw_tensor": true, "reductions": "min,abs_mean,l2_norm", "save_shape": false}``."""
        return {
            "save_raw_tensor": self.save_raw_tensor,
            "reductions": self.reductions_string(),
            "save_shape": self.save_shape,
        }

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> ReductionConfig:
        """Inverse of :meth:`to_json_dict` (``reductions`` may also be a list of items)."""
        if not isinstance(d, Mapping):
            raise SMDebugValueError(f"reduction_config must be a JSON object, got {d!r}")
        reductions = d.get("reductions", "")
        if isinstance(reductions, list) and all(isinstance(r, str) for r in reductions):
            reductions = ",".join(reductions)
        return cls.from_reductions_string(
            "" if reductions is None else reductions,
            save_raw_tensor=d.get("save_raw_tensor", False),
            save_shape=d.get("save_shape", False),
        )

    @classmethod
    def from_hook_params(cls, params: Mapping[str, Any]) -> ReductionConfig | None:
        """Build from ``HookParameters``/``CollectionParameters``; None if no reduction key is there.

        Unlike :meth:`from_json_dict`, the booleans may be the strings ``"true"``/``"false"``
        (any case): SageMaker's API types these parameters as string maps.
        """
        if not any(k in params for k in REDUCTION_CONFIG_KEYS):
            return None
        return cls.from_reductions_string(
            params.get("reductions") or "",
            save_raw_tensor=_lenient_bool(params.get("save_raw_tensor", False), "save_raw_tensor"),
            save_shape=_lenient_bool(params.get("save_shape", False), "save_shape"),
        )


def _lenient_bool(value: Any, what: str) -> bool:
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return _strict_bool(value, what)
