"""``debughookconfig.json``: the hook configuration SageMaker writes into a training container.

The file is read from ``$SMDEBUG_CONFIG_FILE_PATH``, else ``/opt/ml/input/config/debughookconfig.json``
(only when asked: nothing here runs at import). Schema (values of the two parameter maps are
strings on SageMaker; JSON numbers and booleans are accepted too)::

    {"LocalPath": "/opt/ml/output/tensors", "S3OutputPath": "s3://...",
     "HookParameters": {"save_interval": "500", "train.save_interval": "10", "save_steps": "1,2",
                        "start_step": "0", "end_step": "100", "reductions": "min,abs_mean,l2_norm",
                        "save_raw_tensor": "true", "save_shape": "false", "save_all": "false",
                        "include_regex": "r1,r2", "include_workers": "one|all"},
     "CollectionConfigurations": [{"CollectionName": "gradients",
        "CollectionParameters": {"include_regex": "...", "save_interval": "...", "eval.end_step": "...",
                                 "reductions": "...", "save_histogram": "true"}}]}

Save keys are layered per mode, lowest first: the hook's general keys, the hook's mode-prefixed
keys, the collection's general keys, the collection's mode-prefixed keys (a collection's own keys
win over the hook's). Every value is checked strictly and a bad one raises :class:`HookError`
naming the key and the value.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from murphy.core.collection import Collection
from murphy.core.modes import ModeKeys
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig, SaveConfigMode
from murphy.exceptions import HookError, MurphyError

CONFIG_FILE_PATH_ENV = "SMDEBUG_CONFIG_FILE_PATH"
DEFAULT_CONFIG_FILE_PATH = "/opt/ml/input/config/debughookconfig.json"
DEFAULT_LOCAL_PATH = "/opt/ml/output/tensors"

_SAVE_KEYS = ("save_interval", "save_steps", "start_step", "end_step")
_MODE_PREFIXES = {m: m.name.lower() + "." for m in ModeKeys}


@dataclass(frozen=True)
class CollectionSettings:
    """One entry of ``CollectionConfigurations``, parsed."""

    name: str
    include_regex: tuple[str, ...] = ()
    save_config: SaveConfig | None = None
    reduction_config: ReductionConfig | None = None
    save_histogram: bool = True


@dataclass(frozen=True)
class HookConfig:
    """The parsed ``debughookconfig.json``; build it with :meth:`from_dict` or :meth:`load`."""

    out_dir: str = DEFAULT_LOCAL_PATH
    s3_output_path: str | None = None
    save_config: SaveConfig | None = None
    reduction_config: ReductionConfig | None = None
    include_regex: tuple[str, ...] = ()
    include_collections: tuple[str, ...] = ()
    collections: tuple[CollectionSettings, ...] = ()
    save_all: bool = False
    include_workers: str = "one"
    export_tensorboard: bool = False
    tensorboard_dir: str | None = None
    hook_parameters: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def default_path() -> str:
        """``$SMDEBUG_CONFIG_FILE_PATH``, else the SageMaker default path."""
        return os.environ.get(CONFIG_FILE_PATH_ENV) or DEFAULT_CONFIG_FILE_PATH

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> HookConfig:
        """Read and parse the config file (``path`` defaults to :meth:`default_path`)."""
        file_path = Path(path if path is not None else cls.default_path())
        try:
            text = file_path.read_text(encoding="utf-8")
        except OSError as e:
            raise HookError(f"cannot read hook config {str(file_path)!r}: {e}") from e
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise HookError(f"hook config {str(file_path)!r} is not valid JSON: {e}") from e
        return cls.from_dict(doc)

    @classmethod
    def from_dict(cls, doc: Any) -> HookConfig:
        """Parse the JSON document of ``debughookconfig.json``."""
        if not isinstance(doc, Mapping):
            raise HookError(f"hook config must be a JSON object, got {type(doc).__name__}")
        params = _string_map(doc.get("HookParameters"), "HookParameters")
        colls = _parse_collections(doc.get("CollectionConfigurations"), params)
        workers = _text(params.get("include_workers", "one"), "include_workers").strip().lower()
        if workers not in ("one", "all"):
            raise HookError(f"HookParameters.include_workers must be 'one' or 'all', got {workers!r}")
        tb_dir = params.get("tensorboard_dir")
        return cls(
            out_dir=_text(doc.get("LocalPath") or DEFAULT_LOCAL_PATH, "LocalPath"),
            s3_output_path=_optional_text(doc.get("S3OutputPath"), "S3OutputPath"),
            save_config=_save_config(params, None, "HookParameters"),
            reduction_config=_reduction_config(params, "HookParameters"),
            include_regex=_regex_list(params.get("include_regex"), "HookParameters.include_regex"),
            include_collections=tuple(c.name for c in colls),
            collections=colls,
            save_all=_bool(params.get("save_all", False), "HookParameters.save_all"),
            include_workers=workers,
            export_tensorboard=_bool(
                params.get("export_tensorboard", False), "HookParameters.export_tensorboard"
            ),
            tensorboard_dir=None if tb_dir is None else _text(tb_dir, "HookParameters.tensorboard_dir"),
            hook_parameters=dict(params),
        )


def _parse_collections(raw: Any, hook_params: Mapping[str, Any]) -> tuple[CollectionSettings, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise HookError("CollectionConfigurations must be a JSON list")
    out: list[CollectionSettings] = []
    for i, entry in enumerate(raw):
        where = f"CollectionConfigurations[{i}]"
        if not isinstance(entry, Mapping):
            raise HookError(f"{where} must be a JSON object")
        name = entry.get("CollectionName")
        if not isinstance(name, str) or not name:
            raise HookError(f"{where}.CollectionName must be a non-empty string, got {name!r}")
        params = _string_map(entry.get("CollectionParameters"), f"{where}.CollectionParameters")
        loc = f"CollectionConfigurations[{name}]"
        out.append(
            CollectionSettings(
                name=name,
                include_regex=_regex_list(params.get("include_regex"), f"{loc}.include_regex"),
                save_config=_save_config(params, hook_params, loc),
                reduction_config=_reduction_config(params, loc),
                save_histogram=_bool(params.get("save_histogram", True), f"{loc}.save_histogram"),
            )
        )
    return tuple(out)


def _save_config(
    params: Mapping[str, Any], base: Mapping[str, Any] | None, where: str
) -> SaveConfig | None:
    """The per-mode save config from ``params`` layered over ``base`` (None when no key is set)."""
    own = [k for k in params if _is_save_key(k)]
    if not own:
        return None
    layers = ([base] if base is not None else []) + [params]
    modes: dict[ModeKeys, SaveConfigMode] = {}
    for mode, prefix in _MODE_PREFIXES.items():
        values: dict[str, Any] = {}
        for layer in layers:
            for key in _SAVE_KEYS:
                for full in (key, prefix + key):
                    if full in layer:
                        values[key] = _save_value(key, layer[full], f"{where}.{full}")
        if values:
            modes[mode] = _mode_config(values, where)
    return SaveConfig(mode_save_configs=modes)


def _mode_config(values: Mapping[str, Any], where: str) -> SaveConfigMode:
    try:
        return SaveConfigMode(**values)
    except (MurphyError, TypeError, ValueError) as e:
        raise HookError(f"{where}: invalid save config {dict(values)!r}: {e}") from e


def _is_save_key(key: str) -> bool:
    _, _, tail = key.rpartition(".")
    prefix = key[: -len(tail)] if "." in key else ""
    return tail in _SAVE_KEYS and (prefix == "" or prefix in _MODE_PREFIXES.values())


def _save_value(key: str, value: Any, where: str) -> Any:
    if key == "save_steps":
        text = _text(value, where) if not isinstance(value, list) else ",".join(map(str, value))
        return tuple(_int(p, where) for p in text.split(",") if p.strip())
    if key == "end_step" and isinstance(value, str) and value.strip().lower() in ("", "none", "null"):
        return None
    number = _int(value, where)
    if key == "save_interval" and number <= 0:
        raise HookError(f"{where} must be a positive integer, got {value!r}")
    if number < 0:
        raise HookError(f"{where} must not be negative, got {value!r}")
    return number


def _reduction_config(params: Mapping[str, Any], where: str) -> ReductionConfig | None:
    keys = ("reductions", "save_raw_tensor", "save_shape")
    if not any(k in params for k in keys):
        return None
    reductions = _text(params.get("reductions", ""), f"{where}.reductions")
    save_raw = _bool(params.get("save_raw_tensor", False), f"{where}.save_raw_tensor")
    save_shape = _bool(params.get("save_shape", False), f"{where}.save_shape")
    try:
        return ReductionConfig.from_reductions_string(
            reductions, save_raw_tensor=save_raw, save_shape=save_shape
        )
    except (MurphyError, ValueError) as e:
        raise HookError(f"{where}.reductions: invalid value {reductions!r}: {e}") from e


def _string_map(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise HookError(f"{where} must be a JSON object of strings")
    for key, value in raw.items():
        if not isinstance(value, str | int | float | bool | list):
            raise HookError(f"{where}.{key}: unsupported value {value!r}")
    return dict(raw)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise HookError(f"{where} must be a string, got {value!r}")
    return value


def _optional_text(value: Any, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _int(value: Any, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise HookError(f"{where} must be an integer, got {value!r}")


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise HookError(f"{where} must be 'true' or 'false', got {value!r}")


def _regex_list(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list):
        items = [_text(v, where) for v in value]
    else:
        items = _text(value, where).split(",")
    out = tuple(p.strip() for p in items if p.strip())
    for pattern in out:
        try:
            re.compile(pattern)
        except re.error as e:
            raise HookError(f"{where}: invalid regex {pattern!r}: {e}") from e
    return out


class _HasCollections(Protocol):
    def get_collection(self, name: str) -> Collection: ...


_H = TypeVar("_H", bound=_HasCollections)


def apply_collection_settings(hook: _HasCollections, cfg: HookConfig, *, reductions: bool = True) -> None:
    """The job's ``CollectionConfigurations`` applied to ``hook``'s collections (created when new).
    ``reductions=False`` for a hook that saves no reductions (XGBoost's), as smdebug's."""
    for settings in cfg.collections:
        coll = hook.get_collection(settings.name)
        coll.include(list(settings.include_regex))
        if settings.save_config is not None:
            coll.save_config = settings.save_config
        if reductions and settings.reduction_config is not None:
            coll.reduction_config = settings.reduction_config
        coll.save_histogram = settings.save_histogram


def hook_from_config(
    cls: Callable[..., _H],
    cfg: HookConfig,
    *,
    save_config_of: Callable[[HookConfig], SaveConfig | None] | None = None,
    reductions: bool = True,
    **kwargs: Any,
) -> _H:
    """A hook of ``cls`` (any framework's: they share smdebug's constructor) configured by a parsed
    ``debughookconfig.json``. ``save_config_of`` gives the hook's save config (default: the file's,
    ``cfg.save_config``) for a framework with its own default interval (XGBoost's);
    ``reductions=False`` for a hook that saves no reductions: no ``reduction_config`` is passed to
    it and the collections' are not applied (smdebug's XGBoost hook)."""
    # A dict, not kwargs itself: a caller's own reduction_config stays a TypeError, as before.
    own = {"reduction_config": cfg.reduction_config} if reductions else {}
    hook = cls(
        out_dir=cfg.out_dir,
        export_tensorboard=cfg.export_tensorboard,
        tensorboard_dir=cfg.tensorboard_dir,
        save_config=cfg.save_config if save_config_of is None else save_config_of(cfg),
        include_regex=list(cfg.include_regex) or None,
        include_collections=list(cfg.include_collections),
        save_all=cfg.save_all,
        include_workers=cfg.include_workers,
        **own,
        **kwargs,
    )
    apply_collection_settings(hook, cfg, reductions=reductions)
    return hook
