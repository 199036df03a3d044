"""Helpers shared by the built-in rules: unknown-parameter checks, tensor selection in layer
order, loss selection and small numeric helpers for findings' messages.

Layer order is decided in one place, :func:`layer_order`, so it can follow the hook's write
order once the trial exposes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from murphy.core.modes import ModeKeys
from murphy.exceptions import TensorUnavailable, TensorUnavailableForStep
from murphy.rules.params import RuleParameterError, as_list
from murphy.rules.selection import select_tensor_names

# RuleParameters keys that belong to the rule container's wiring, not to the rule itself; a
# rule ignores them if the runner passes them through.
WIRING_PARAMETERS = frozenset({"rule_to_invoke", "action_json", "source_s3_uri", "base_trial"})
_OTHER_TRIAL = re.compile(r"^other_trial_\d+$")

Array = np.ndarray[Any, Any]


# ---- parameters ------------------------------------------------------------------------------


def reject_unknown(rule: str, extra: Mapping[str, Any], accepted: Iterable[str] = ()) -> None:
    """Raise :class:`RuleParameterError` naming every parameter ``rule`` does not know.

    Wiring keys (``rule_to_invoke``, ``action_json``, ``other_trial_<i>`` ...) are ignored.
    """
    unknown = sorted(k for k in extra if k not in WIRING_PARAMETERS and not _OTHER_TRIAL.match(k))
    if unknown:
        known = ", ".join(sorted(accepted)) or "none"
        raise RuleParameterError(
            f"{rule}: unknown parameter(s) {', '.join(unknown)} (accepted: {known})"
        )


def optional_list(value: Any, name: str, rule: str) -> list[str] | None:
    """A comma list parameter; None when absent or empty."""
    items = as_list(value, name, rule)
    return items or None


def checked_regexes(value: Any, name: str, rule: str) -> list[str] | None:
    """A comma list of regexes, each compiled now so a bad one fails at construction."""
    items = optional_list(value, name, rule)
    for r in items or []:
        try:
            re.compile(r)
        except re.error as exc:
            raise RuleParameterError(f"{rule}: parameter {name}={r!r} is not a valid regex: {exc}") from exc
    return items


def parse_mode(value: Any, name: str, rule: str) -> ModeKeys | None:
    """``TRAIN``/``EVAL``/``PREDICT``/``GLOBAL`` (any case, ``ModeKeys.`` prefix allowed)."""
    if value is None or isinstance(value, ModeKeys):
        return value
    text = str(value).strip().upper().removeprefix("MODEKEYS.")
    if text in ("", "NONE", "NULL"):
        return None
    try:
        return ModeKeys[text]
    except KeyError:
        raise RuleParameterError(
            f"{rule}: parameter {name}={value!r} is not a mode (TRAIN, EVAL, PREDICT, GLOBAL)"
        ) from None


def require(condition: bool, rule: str, name: str, value: Any, expected: str) -> None:
    """Raise :class:`RuleParameterError` unless ``condition`` (a range check)."""
    if not condition:
        raise RuleParameterError(f"{rule}: parameter {name}={value!r} must be {expected}")


# ---- tensor selection ------------------------------------------------------------------------


def layer_order(trial: Any, names: Iterable[str], step: int) -> list[str]:
    """``names`` in the order the hook wrote them at global ``step`` (its layer order).

    Uses ``trial.write_order(step)`` (murphy's trial: parameters, then layer inputs/outputs in
    forward order, the loss, then gradients in backward order, i.e. the order of computation);
    for another trial implementation, names sorted alphabetically.
    """
    wanted = set(names)
    write_order = getattr(trial, "write_order", None)
    if callable(write_order):
        ordered = [n for n in write_order(step) if n in wanted]
        return ordered + sorted(wanted.difference(ordered))
    return sorted(wanted)


def collection_names_at(trial: Any, collection: str, step: int | None = None) -> list[str]:
    """Tensor names of ``collection`` (at ``step``); [] if the trial has no such collection."""
    if collection not in trial.collections():
        return []
    kwargs: dict[str, Any] = {} if step is None else {"step": step}
    return list(trial.tensor_names(collection=collection, **kwargs))


def selected_in_layer_order(
    trial: Any,
    step: int,
    collection_names: list[str] | None = None,
    tensor_regex: list[str] | None = None,
) -> list[str]:
    """Tensors saved at ``step`` selected by collections and/or regexes (all when neither is
    given; unknown collections select nothing), in layer order."""
    known = [c for c in collection_names or [] if c in trial.collections()]
    if collection_names and not known and not tensor_regex:
        return []
    names = select_tensor_names(trial, known or None, tensor_regex, step=step)
    return layer_order(trial, names, step)


def value_at(trial: Any, name: str, step: int, mode: ModeKeys = ModeKeys.GLOBAL,
             worker: str | None = None) -> Array | None:
    """The raw value of ``name`` at ``step`` (of ``worker``; default: the first that saved
    it), or None when only reductions (or nothing) exist."""
    try:
        return np.asarray(trial.tensor(name).value(step, mode=mode, worker=worker))
    except (TensorUnavailableForStep, TensorUnavailable):
        return None


def workers_at(trial: Any, name: str, step: int) -> list[str | None]:
    """The workers whose value of ``name`` a rule checks at ``step``: every one that saved it
    when there are several (a multi-instance job's ranks: an anomaly on one rank must be found),
    else ``[None]`` (the one worker, read as before)."""
    try:
        workers: list[str | None] = list(trial.tensor(name).workers(step))
    except (TensorUnavailableForStep, TensorUnavailable):
        return [None]
    return workers if len(workers) > 1 else [None]


def on_worker(worker: str | None) -> str:
    """`` on worker_1`` for a finding's message (nothing with one worker)."""
    return f" on {worker}" if worker is not None else ""


def values_in_layer_order(trial: Any, names: Iterable[str], step: int) -> Iterator[tuple[str, Array]]:
    """``(name, raw value)`` at ``step`` in layer order, skipping tensors without raw data."""
    for name in layer_order(trial, names, step):
        value = value_at(trial, name, step)
        if value is not None:
            yield name, value


def abs_mean_at(trial: Any, name: str, step: int, worker: str | None = None) -> float | None:
    """``mean(|x|)`` from the stored ``abs_mean`` reduction or the raw value; None if neither."""
    try:
        return scalar(trial.tensor(name).reduction_value(step, "mean", abs=True, worker=worker))
    except (TensorUnavailableForStep, TensorUnavailable):
        return None


# ---- losses ----------------------------------------------------------------------------------


def loss_names(
    trial: Any,
    collection_names: list[str] | None,
    tensor_regex: list[str] | None,
    use_losses_collection: bool = True,
) -> list[str]:
    """Loss tensors: the ``losses`` collection (if asked) plus the given collections/regexes, sorted."""
    names: set[str] = set()
    if use_losses_collection:
        names.update(collection_names_at(trial, "losses"))
    for c in collection_names or []:
        names.update(collection_names_at(trial, c))
    if tensor_regex:
        names.update(trial.tensor_names(regex=tensor_regex))
    return sorted(names)


def loss_steps(trial: Any, name: str, mode: ModeKeys) -> list[int]:
    """Mode steps at which loss ``name`` was saved in ``mode`` (sorted)."""
    return sorted(trial.tensor(name).steps(mode=mode)) if trial.has_tensor(name) else []


# ---- numbers and messages --------------------------------------------------------------------


def scalar(value: Any) -> float:
    """A saved scalar (shape () or a single element) as a float; the mean of anything larger."""
    arr = np.asarray(value, dtype=np.float64)
    return float(arr.reshape(-1)[0]) if arr.size == 1 else float(arr.mean())


def fmt(x: float) -> str:
    """A number for a human message: 6 significant digits, ``nan``/``inf`` as such."""
    return f"{x:.6g}"


def percent(count: int | float, total: int | float) -> float:
    """``100 * count / total`` (0 for an empty total)."""
    return 100.0 * float(count) / float(total) if total else 0.0


def step_label(trial: Any, step: int) -> str:
    """``step 12`` or ``step 12 (TRAIN step 6)`` for a message."""
    mode, mode_step = trial.mode_modestep(step)
    if mode is None or mode is ModeKeys.GLOBAL:
        return f"step {step}"
    return f"step {step} ({mode.name} step {mode_step})"


def unit_activity_percent(active: Array) -> Array:
    """Per unit, the % of samples where ``active`` holds.

    Axis 0 is the batch; every other position is a unit (a neuron, or a channel-pixel). A 0-d
    or 1-d tensor is one sample of ``size`` units.
    """
    mask = np.asarray(active, dtype=bool)
    if mask.ndim < 2:
        return np.asarray(mask.reshape(1, -1).mean(axis=0) * 100.0, dtype=np.float64)
    return np.asarray(mask.reshape(mask.shape[0], -1).mean(axis=0) * 100.0, dtype=np.float64)
