"""Questions put to a trial through smdebug's public reader and rule API, the same code for
``smdebug`` (run in its venv by smdebug_side/stepper.py) and for ``murphy`` (in the test process).

Each probe takes the library's names in an :class:`Api` and returns a JSON-able dict; a call
that raises is recorded as ``{"error": "<ExceptionType>"}`` (the type is part of the API).
Imports only the standard library and numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

LOSS = "CrossEntropyLoss_output_0"


@dataclass
class Api:
    """The names a probe needs from ``smdebug`` or from ``murphy``."""

    modes: Any
    no_refresh: Any
    refresh: Any
    Rule: Any
    invoke_rule: Any


def call(fn: Callable[[], Any]) -> Any:
    try:
        return jsonable(fn())
    except Exception as e:  # the exception *type* is what is compared
        return {"error": type(e).__name__}


def message(fn: Callable[[], Any]) -> str | None:
    """The text of the exception ``fn`` raises (messages are matched by users' code and logs)."""
    try:
        fn()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def jsonable(x: Any) -> Any:
    if isinstance(x, np.ndarray | np.generic):
        return {"array": np.asarray(x).tolist(), "dtype": str(np.asarray(x).dtype), "shape": list(np.shape(x))}
    if hasattr(x, "name") and hasattr(x, "value") and type(x).__name__ in ("ModeKeys", "StepState"):
        return x.name
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    return x


def fresh(trial: Any, api: Any, steps_to_ask: list[int]) -> dict[str, Any]:
    """What a direct call sees now: steps, step states, names, values, end state, token."""
    out: dict[str, Any] = {
        "steps": call(trial.steps),
        "steps_incomplete": call(lambda: trial.steps(show_incomplete_steps=True)),
        "train_steps": call(lambda: trial.steps(mode=api.modes.TRAIN)),
        "tensor_names": call(trial.tensor_names),
        "has_loss": call(lambda: trial.has_tensor(LOSS)),
        "workers": call(lambda: sorted(trial.workers())),
        "num_workers": trial.num_workers,
        "last_index_token": trial.last_index_token,
    }
    for s in steps_to_ask:
        out[f"passed_{s}"] = call(lambda s=s: trial.has_passed_step(s))
        out[f"mode_{s}"] = call(lambda s=s: [jsonable(v) for v in trial.mode_modestep(s)])
        out[f"value_{s}"] = call(lambda s=s: trial.tensor(LOSS).value(s))
    out["loss_steps"] = call(lambda: trial.tensor(LOSS).steps())
    out["msg_step_99"] = message(lambda: trial.tensor(LOSS).value(99))
    out["loaded_all_steps"] = trial.loaded_all_steps
    out["last_complete_step"] = trial.last_complete_step
    return out


def after_end(trial: Any, api: Any) -> dict[str, Any]:
    """Waiting and lookups once the run has finished (past the end, skipped, known)."""
    last = max(trial.steps())
    return {
        "wait_known": call(lambda: trial.wait_for_steps([0, last])),
        "wait_past_end": call(lambda: trial.wait_for_steps([last + 5])),
        "value_past_end": call(lambda: trial.tensor(LOSS).value(last + 5)),
        "passed_past_end": call(lambda: trial.has_passed_step(last + 5)),
        "mode_unknown": call(lambda: list(trial.mode_modestep(last + 5))),
        "global_unknown": call(lambda: trial.global_step(api.modes.TRAIN, 999)),
        "tensor_unknown": call(lambda: trial.tensor("no_such_tensor")),
        "has_unknown": call(lambda: trial.has_tensor("no_such_tensor")),
        "bad_worker": call(lambda: trial.tensor(LOSS).value(0, worker="worker_99")),
        "modes": call(lambda: sorted(m.name for m in trial.modes())),
        "logger": call(lambda: callable(trial.logger.info)),
        "refresh_data": call(trial.refresh_data),
        "refresh_tensor": call(lambda: trial.refresh_tensor(LOSS)),
        "labels": call(lambda: trial.labels(0)),
        "predictions": call(lambda: trial.predictions(0)),
        "prev_steps": call(lambda: trial.tensor(LOSS).prev_steps(last, n=2)),
        "reduction_values_raw_only": call(lambda: sorted(trial.tensor(LOSS).reduction_values(0))),
        "msg_no_more_data": message(lambda: trial.wait_for_steps([last + 5], mode=api.modes.TRAIN)),
        "msg_step_unavailable": message(lambda: trial.tensor(LOSS).value(last + 5, mode=api.modes.EVAL)),
        "msg_tensor_unavailable": message(lambda: trial.tensor("no_such_tensor")),
        "msg_invalid_worker": message(lambda: trial.tensor(LOSS).value(0, worker="worker_99")),
        "msg_shape": message(lambda: trial.tensor(LOSS).shape(0, worker="worker_99")),
    }


def waits(trial: Any, api: Any, steps_to_wait: list[int]) -> dict[str, Any]:
    """``wait_for_steps`` one step at a time (none may block: each is settled or past the end)."""
    return {f"wait_{s}": message(lambda s=s: trial.wait_for_steps([s])) for s in steps_to_wait}


def contexts(trial: Any, api: Any) -> dict[str, Any]:
    """``no_refresh`` / ``refresh`` yield what they were given."""
    out: dict[str, Any] = {}
    with api.no_refresh([trial]) as [t]:
        out["no_refresh_list_yields_trial"] = t is trial
        out["inside_no_refresh"] = trial.dynamic_refresh
    with api.no_refresh(trial) as t:
        out["no_refresh_single_yields_trial"] = t is trial
    with api.refresh([trial]) as ts:
        out["refresh_yields"] = [x is trial for x in ts]
        out["inside_refresh"] = trial.dynamic_refresh
    out["after"] = trial.dynamic_refresh
    return out


def collection(trial: Any, api: Any) -> dict[str, Any]:
    """An unseen collection name gives a new, empty collection that is listed afterwards."""
    before = sorted(trial.collections())
    c = trial.collection("no_such_collection")
    return {
        "before": before,
        "name": c.name,
        "tensor_names": sorted(c.tensor_names),
        "include_regex": list(c.include_regex),
        "listed_after": "no_such_collection" in trial.collections(),
        "same_object": trial.collection("no_such_collection") is c,
        "names_in_it": call(lambda: trial.tensor_names(collection="no_such_collection")),
        "known": sorted(trial.collection("losses").tensor_names),
    }


def required_tensors(trial: Any, api: Any) -> dict[str, Any]:
    """A custom rule that uses every RequiredTensors method, run by invoke_rule."""
    seen: list[dict[str, Any]] = []

    class Probe(api.Rule):  # type: ignore[misc,name-defined]
        def __init__(self, base_trial: Any) -> None:
            super().__init__(base_trial, action_str="")

        def set_required_tensors(self, step: int) -> None:
            self.req_tensors.add(LOSS, [step])
            self.req_tensors.add(LOSS, [0])
            self.req_tensors.add("relu_output", [step], should_match_regex=True)

        def invoke_at_step(self, step: int) -> bool:
            rt = self.req_tensors
            names = list(rt.get_names())
            seen.append({
                "step": step,
                "names": names,
                "steps": {n: list(rt.get_tensor_steps(n)) for n in names},
                "tensors": [t.name for t in rt.get()],
                "unknown_steps": call(lambda: rt.get_tensor_steps("no_such_tensor")),
                "values": [call(lambda t=t: t.value(step)) for t in rt.get() if t.name == LOSS],
            })
            return False

    class Unknown(api.Rule):  # type: ignore[misc,name-defined]
        def __init__(self, base_trial: Any) -> None:
            super().__init__(base_trial, action_str="")

        def set_required_tensors(self, step: int) -> None:
            self.req_tensors.add("no_such_tensor", [step])

        def invoke_at_step(self, step: int) -> bool:
            raise AssertionError("not reached: add() raises TensorUnavailable first")

    last = max(trial.steps())
    api.invoke_rule(Probe(trial), start_step=0, end_step=last + 1)
    unknown = call(lambda: Unknown(trial).invoke(0))
    return {"seen": seen, "unknown_name": unknown}


def shapes(trial: Any, api: Any) -> dict[str, Any]:
    """A run whose index files hold only shapes (no events file name): steps and shapes."""
    out: dict[str, Any] = {
        "steps": call(trial.steps),
        "steps_incomplete": call(lambda: trial.steps(show_incomplete_steps=True)),
        "tensor_names": call(trial.tensor_names),
    }
    for name in trial.tensor_names():
        t = trial.tensor(name)
        for s in t.steps():
            out[f"{name}|{s}|shape"] = call(lambda t=t, s=s: list(t.shape(s)))
            out[f"{name}|{s}|value"] = call(lambda t=t, s=s: t.value(s))
    return out


PROBES = {
    "fresh": fresh,
    "after_end": after_end,
    "waits": waits,
    "contexts": contexts,
    "collection": collection,
    "required_tensors": required_tensors,
    "shapes": shapes,
}
