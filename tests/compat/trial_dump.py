"""Dump everything a Trial exposes, through smdebug's public Trial API only, so the same code
runs against ``smdebug.trials.create_trial`` (in the smdebug venv) and ``murphy.trial.create_trial``.

A dump is a JSON-able ``meta`` dict plus ``arrays`` (key → ndarray); :func:`compare` diffs two
dumps (floats bitwise). Imports only numpy.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

MODES = ("TRAIN", "EVAL")
REDUCTIONS = (("min", False), ("max", False), ("mean", False), ("l2", False), ("mean", True))


class _Dump:
    def __init__(self) -> None:
        self.meta: dict[str, Any] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self.errors: dict[str, str] = {}

    def value(self, key: str, fn: Callable[[], Any]) -> None:
        """Record fn()'s array, or the name of the exception it raised."""
        try:
            self.arrays[key] = np.asarray(fn())
        except Exception as e:  # the exception *type* is part of the API being compared
            self.errors[key] = type(e).__name__


def _steps_and_modes(trial: Any, modes: Any, d: _Dump) -> None:
    d.meta["steps"] = {"GLOBAL": [int(s) for s in trial.steps()]}
    for m in MODES:
        d.meta["steps"][m] = [int(s) for s in trial.steps(mode=getattr(modes, m))]
    d.meta["modes"] = sorted(m.name for m in trial.modes())
    d.meta["mode_of_step"] = {
        str(s): [trial.mode(s).name, int(trial.mode_step(s))] for s in d.meta["steps"]["GLOBAL"]
    }
    d.meta["global_step"] = {
        m: {str(ms): int(trial.global_step(getattr(modes, m), ms)) for ms in d.meta["steps"][m]}
        for m in MODES
    }


def _tensor(trial: Any, modes: Any, name: str, d: _Dump) -> None:
    t = trial.tensor(name)
    info: dict[str, Any] = {"steps": [int(s) for s in t.steps()]}
    for m in MODES:
        info[m] = [int(s) for s in t.steps(mode=getattr(modes, m))]
    info["workers"] = {}
    for s in info["steps"]:
        workers = sorted(t.workers(s))
        info["workers"][str(s)] = workers
        d.value(f"{name}|{s}|default|raw", lambda s=s: t.value(s))
        for w in workers:
            d.value(f"{name}|{s}|{w}|raw", lambda s=s, w=w: t.value(s, worker=w))
            for red, abs_ in REDUCTIONS:
                d.value(
                    f"{name}|{s}|{w}|{'abs_' if abs_ else ''}{red}",
                    lambda s=s, w=w, red=red, abs_=abs_: t.reduction_value(s, red, worker=w, abs=abs_),
                )
    for m in MODES:  # mode-step addressing
        for ms in info[m]:
            d.value(f"{name}|{m}:{ms}|default|raw", lambda ms=ms, m=m: t.value(ms, mode=getattr(modes, m)))
    d.meta["tensors"][name] = info


def dump(trial: Any, modes: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read everything from ``trial``; ``modes`` is the implementation's ModeKeys enum."""
    d = _Dump()
    _steps_and_modes(trial, modes, d)
    d.meta["workers"] = sorted(trial.workers())
    d.meta["num_workers"] = int(trial.num_workers)
    d.meta["tensor_names"] = sorted(trial.tensor_names())
    d.meta["collections"] = {
        c: sorted(trial.tensor_names(collection=c)) for c in sorted(trial.collections())
    }
    d.meta["tensors"] = {}
    for name in d.meta["tensor_names"]:
        _tensor(trial, modes, name, d)
    d.value("missing|step", lambda: trial.tensor(d.meta["tensor_names"][0]).value(10**6))
    d.value("missing|tensor", lambda: trial.tensor("no_such_tensor"))
    d.meta["errors"] = d.errors
    return d.meta, d.arrays


def save(prefix: str | Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """``prefix.json`` (meta + array keys) and ``prefix.npz`` (a0, a1, ...)."""
    keys = sorted(arrays)
    Path(f"{prefix}.json").write_text(json.dumps({"meta": meta, "keys": keys}, indent=1, sort_keys=True))
    np.savez(f"{prefix}.npz", **{f"a{i}": arrays[k] for i, k in enumerate(keys)})


def load(prefix: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    doc = json.loads(Path(f"{prefix}.json").read_text())
    with np.load(f"{prefix}.npz") as z:
        arrays = {k: z[f"a{i}"] for i, k in enumerate(doc["keys"])}
    return doc["meta"], arrays


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def compare(
    left: tuple[dict[str, Any], dict[str, np.ndarray]],
    right: tuple[dict[str, Any], dict[str, np.ndarray]],
    *,
    value_filter: Callable[[str], bool] = lambda key: True,
) -> list[str]:
    """Differences between two dumps (empty when identical; arrays compared bitwise)."""
    (lm, la), (rm, ra) = left, right
    diffs = [f"meta[{k!r}]: {lm.get(k)!r} != {rm.get(k)!r}" for k in sorted(set(lm) | set(rm)) if lm.get(k) != rm.get(k)]
    for k in sorted(set(la) | set(ra)):
        if not value_filter(k):
            continue
        if k not in la or k not in ra:
            diffs.append(f"array {k!r} only in {'left' if k in la else 'right'}")
        elif not _same(la[k], ra[k]):
            diffs.append(f"array {k!r}: {la[k].dtype}{la[k].shape} {la[k].ravel()[:4]} != {ra[k].dtype}{ra[k].shape} {ra[k].ravel()[:4]}")
    return diffs
