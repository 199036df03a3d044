"""When to save: smdebug's ``SaveConfig`` / ``SaveConfigMode`` with the same semantics.

A step is saved when it is in ``save_steps`` (a union with the interval), or when
``start_step <= step < end_step`` and ``step % save_interval == 0``. The modulo is *not* offset
by ``start_step`` and ``end_step`` is exclusive. Every decision is taken on the **mode step**.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from murphy.core.modes import ModeKeys
from murphy.exceptions import SMDebugValueError

DEFAULT_SAVE_INTERVAL = 500
DEFAULT_START_STEP = 0

# Keys of debughookconfig.json HookParameters / CollectionParameters that configure saving.
SAVE_CONFIG_KEYS = ("save_interval", "save_steps", "start_step", "end_step")
MODE_KEY_PREFIXES: dict[ModeKeys, str] = {m: m.name.lower() + "." for m in ModeKeys}


def _to_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise SMDebugValueError(f"{what} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise SMDebugValueError(f"{what} must be an integer, got {value!r}")


def _to_optional_int(value: Any, what: str) -> int | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None
    return _to_int(value, what)


def _to_steps(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        parts = [p for p in (s.strip() for s in value.split(",")) if p]
        return tuple(sorted({_to_int(p, "save_steps") for p in parts}))
    if isinstance(value, Iterable):
        return tuple(sorted({_to_int(p, "save_steps") for p in value}))
    return (_to_int(value, "save_steps"),)


@dataclass(frozen=True)
class SaveConfigMode:
    """The save rule for one mode (smdebug's ``SaveConfigMode``).

    ``save_steps`` accepts any iterable of ints or a comma string (``"1,2"``); it is kept as a
    sorted tuple of unique steps.
    """

    save_interval: int = DEFAULT_SAVE_INTERVAL
    start_step: int = DEFAULT_START_STEP
    end_step: int | None = None
    save_steps: Sequence[int] = field(default=())

    def __post_init__(self) -> None:
        interval = _to_int(self.save_interval, "save_interval")
        if interval <= 0:
            raise SMDebugValueError(f"save_interval must be positive, got {interval}")
        object.__setattr__(self, "save_interval", interval)
        object.__setattr__(self, "start_step", _to_int(self.start_step, "start_step"))
        object.__setattr__(self, "end_step", _to_optional_int(self.end_step, "end_step"))
        object.__setattr__(self, "save_steps", _to_steps(self.save_steps))

    def should_save_step(self, mode_step: int) -> bool:
        """True if ``mode_step`` is saved under this rule."""
        if mode_step in self.save_steps:
            return True
        if mode_step < self.start_step:
            return False
        if self.end_step is not None and mode_step >= self.end_step:
            return False
        return mode_step % self.save_interval == 0

    def to_json_dict(self) -> dict[str, Any]:
        """``{"save_interval": 1, "save_steps": [], "start_step": 0, "end_step": null}``."""
        return {
            "save_interval": self.save_interval,
            "save_steps": list(self.save_steps),
            "start_step": self.start_step,
            "end_step": self.end_step,
        }

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> SaveConfigMode:
        """Inverse of :meth:`to_json_dict`; missing keys take smdebug's defaults."""
        if not isinstance(d, Mapping):
            raise SMDebugValueError(f"a mode save config must be a JSON object, got {d!r}")
        interval = d.get("save_interval")
        start = d.get("start_step")
        return cls(
            save_interval=DEFAULT_SAVE_INTERVAL if interval is None else interval,
            start_step=DEFAULT_START_STEP if start is None else start,
            end_step=d.get("end_step"),
            save_steps=d.get("save_steps") or (),
        )


class SaveConfig:
    """The per-mode save rules (smdebug's ``SaveConfig``).

    ``SaveConfig(save_interval=10)`` (or no arguments at all) applies one rule to every mode.
    With ``mode_save_configs`` (a :class:`SaveConfigMode` or its JSON dict per mode), the modes
    it leaves out are *unset*: written as ``null`` in JSON, as smdebug does, and filled from
    another config by :meth:`merge_default` (how a collection falls back to the hook's config,
    mode by mode). murphy extension: general arguments given together with
    ``mode_save_configs`` fill the modes it leaves out (smdebug ignores them). An unset mode
    reports smdebug's default rule from :meth:`get_save_config` instead of raising.
    """

    def __init__(
        self,
        mode_save_configs: Mapping[ModeKeys, SaveConfigMode | Mapping[str, Any] | None] | None = None,
        save_interval: int | str | None = None,
        start_step: int | str | None = None,
        end_step: int | str | None = None,
        save_steps: Iterable[int] | str | None = None,
    ) -> None:
        general = any(v is not None for v in (save_interval, start_step, end_step, save_steps))
        base = SaveConfigMode.from_json_dict(
            {
                "save_interval": save_interval,
                "start_step": start_step,
                "end_step": end_step,
                "save_steps": save_steps,
            }
        )
        fill = base if general or mode_save_configs is None else None
        self._configs: dict[ModeKeys, SaveConfigMode | None] = dict.fromkeys(ModeKeys, fill)
        for mode, cfg in (mode_save_configs or {}).items():
            if cfg is not None:
                self.set_save_config(mode, cfg)

    @property
    def mode_save_configs(self) -> dict[ModeKeys, SaveConfigMode | None]:
        """A copy of the rule of every mode (None for unset modes)."""
        return dict(self._configs)

    def explicit_modes(self) -> frozenset[ModeKeys]:
        """The modes whose rule is set."""
        return frozenset(m for m, c in self._configs.items() if c is not None)

    def get_save_config(self, mode: ModeKeys) -> SaveConfigMode:
        """The rule for ``mode`` (smdebug's default rule if the mode is unset)."""
        # ModeKeys(mode) only for another mode type: Enum's call is two Python frames a step.
        cfg = self._configs[mode if type(mode) is ModeKeys else ModeKeys(mode)]
        return _DEFAULT_MODE if cfg is None else cfg

    def set_save_config(self, mode: ModeKeys, cfg: SaveConfigMode | Mapping[str, Any]) -> None:
        """Set the rule for ``mode``."""
        if not isinstance(cfg, SaveConfigMode):
            cfg = SaveConfigMode.from_json_dict(cfg)
        self._configs[ModeKeys(mode)] = cfg

    def should_save_step(self, mode: ModeKeys, mode_step: int) -> bool:
        """True if ``mode_step`` of ``mode`` is saved."""
        return self.get_save_config(mode).should_save_step(mode_step)

    def merge_default(self, other: SaveConfig | None) -> SaveConfig:
        """A new config: this config's set modes, ``other``'s rule (or the default) for the rest.

        Every mode of the result is set, as after smdebug's ``merge_default_save_config``.
        """
        merged = SaveConfig()
        for mode in ModeKeys:
            own = self._configs[mode]
            merged._configs[mode] = own if own is not None else (
                other.get_save_config(mode) if other is not None else _DEFAULT_MODE
            )
        return merged

    def to_json_dict(self) -> dict[str, dict[str, Any] | None]:
        """``{"TRAIN": {...}, "EVAL": {...}, "PREDICT": {...}, "GLOBAL": {...}}`` (null if unset)."""
        out: dict[str, dict[str, Any] | None] = {}
        for mode in ModeKeys:
            cfg = self._configs[mode]
            out[mode.name] = None if cfg is None else cfg.to_json_dict()
        return out

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any] | None) -> SaveConfig:
        """Inverse of :meth:`to_json_dict`; modes missing from ``d`` or null stay unset."""
        if d is None:
            return cls()
        if not isinstance(d, Mapping):
            raise SMDebugValueError(f"save_config must be a JSON object, got {d!r}")
        configs: dict[ModeKeys, SaveConfigMode | Mapping[str, Any] | None] = {}
        for key, value in d.items():
            if key not in ModeKeys.__members__:
                raise SMDebugValueError(f"unknown mode {key!r} in save_config")
            configs[ModeKeys[key]] = value
        return cls(mode_save_configs=configs)

    @classmethod
    def from_hook_params(cls, params: Mapping[str, Any], prefix: str = "") -> SaveConfig:
        """Build from ``debughookconfig.json`` keys (values are usually strings).

        General keys (``save_interval``, ``save_steps="1,2"``, ``start_step``, ``end_step``)
        apply to every mode; mode-prefixed keys (``train.save_interval``, ``eval.end_step``...)
        override them field by field for that mode. ``prefix`` is prepended to every key looked
        up. Modes no key touches stay unset.
        """
        general = {k: params[prefix + k] for k in SAVE_CONFIG_KEYS if prefix + k in params}
        configs: dict[ModeKeys, SaveConfigMode | Mapping[str, Any] | None] = {}
        for mode, mode_prefix in MODE_KEY_PREFIXES.items():
            specific = {
                k: params[prefix + mode_prefix + k]
                for k in SAVE_CONFIG_KEYS
                if prefix + mode_prefix + k in params
            }
            if general or specific:
                configs[mode] = {**general, **specific}
        return cls(mode_save_configs=configs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaveConfig):
            return NotImplemented
        return self._configs == other._configs

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        parts = ", ".join(f"{m.name}={self._configs[m]!r}" for m in ModeKeys)
        return f"SaveConfig({parts})"


_DEFAULT_MODE = SaveConfigMode()
