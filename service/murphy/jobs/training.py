"""Watching a job's training hosts: one container per host (``algo-1`` .. ``algo-N``).

The job's training is over when every host's container is gone. The first host that fails
(a non-zero exit, or vanished) fails the job with its reason, naming the host when there are
several (``AlgorithmError: ... (algo-2)``), and its peers are stopped (SIGTERM, SIGKILL after
the grace): without it they would wait for it forever in their next collective. A stop (user,
rule finding, max runtime) signals every host. ``rec.notes["training_exit"]`` is written once,
when the last host is gone: the failing host's exit, else ``algo-1``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from murphy.jobs.model import JobRecord, SecondaryStatus
from murphy.jobs.progress import STAGES, advance, failure_reason
from murphy.jobs.service import request_stop
from murphy.runtimes.base import ContainerState, Handle, Runtime

S = SecondaryStatus
#: ``(rec, key, handle, now) -> changed``: SIGTERM once, SIGKILL after the grace (the supervisor's).
Signal = Callable[[JobRecord, str, Handle, float], bool]
#: ``(rec, key, handle, state) -> changed``: note that a container ended (the supervisor's).
Gone = Callable[[JobRecord, str, Handle, ContainerState], bool]


def host_key(index: int) -> str:
    """The key of host ``algo-<index>`` in ``rec.notes`` (signals, ended): ``algo-1`` keeps the
    one-host key, so records written before multi-instance jobs read the same."""
    return "training" if index == 1 else f"training:algo-{index}"


def _ended(state: ContainerState) -> bool:
    return state.phase in ("exited", "missing")


def _failed(state: ContainerState) -> bool:
    return state.phase == "missing" or state.exit_code != 0


#: ``rec.notes`` key: each ended host's last state, so that it is not asked for again.
ENDED_STATES = "host_states"


def _states(runtime: Runtime, rec: JobRecord, handles: list[Handle]) -> tuple[list[ContainerState], bool]:
    """Every host's state, and whether one ended since the last look. An ended container stays
    ended: its state is remembered (for the handle it was seen on) and the runtime is asked only
    about hosts still running. Only what later looks use is kept: the phase and exit code, and
    the stage (``algo-1``'s drives SecondaryStatus while its peers run); a failing host's reason
    and end time are used in the look that sees it end, which also fixes the job's failure
    (``host_failed``)."""
    known: dict[str, dict[str, Any]] = rec.notes.get(ENDED_STATES) or {}
    states: list[ContainerState] = []
    new: dict[str, dict[str, Any]] = {}
    for i, handle in enumerate(handles, 1):
        seen = known.get(host_key(i))
        if seen is not None and seen.get("id") == handle.id:
            states.append(ContainerState(seen["phase"], exit_code=seen["exit_code"], stage=seen["stage"]))
            continue
        state = runtime.status(handle)
        states.append(state)
        if _ended(state):
            new[host_key(i)] = {"id": handle.id, "phase": state.phase, "exit_code": state.exit_code, "stage": state.stage}
    if new:
        rec.notes[ENDED_STATES] = {**known, **new}
    return states, bool(new)


def watch(runtime: Runtime, rec: JobRecord, now: float, signal: Signal, gone: Gone) -> bool:
    """One look at every host; True when the record changed. Sets ``training_exit`` once all
    hosts are gone (the caller then writes the end marker for a failed run)."""
    handles = rec.training_handles()
    if not handles or "training_exit" in rec.notes:
        return False
    multi = len(handles) > 1
    states, changed = _states(runtime, rec, handles)
    for i, (handle, state) in enumerate(zip(handles, states, strict=True), 1):
        if _ended(state):
            changed |= gone(rec, host_key(i), handle, state)
    failed = rec.notes.get("host_failed")
    culprits = [(state.failure is None, state.ended_at or now, i, state)
                for i, state in enumerate(states, 1) if _ended(state) and _failed(state)]
    if failed is None and culprits:
        # Peers of a host that died fail too (their collective breaks): the host that gave a
        # reason (a failure file) comes first, then the one that ended first.
        _, _, i, state = min(culprits, key=lambda c: c[:3])
        # The reason is the job's once every host is gone (DescribeTrainingJob shows it with
        # Failed); a stop that came first is honoured (the job ends Stopped, without one).
        reason = failure_reason(state, f"algo-{i}" if multi else None) if rec.secondary != S.Stopping else None
        failed = rec.notes["host_failed"] = {"host": f"algo-{i}", "phase": state.phase,
                                             "exit_code": state.exit_code, "at": now, "reason": reason}
        changed = True
    if all(_ended(s) for s in states):
        if failed is not None:
            if failed.get("reason"):
                rec.failure_reason = failed["reason"]
            rec.notes["training_exit"] = {"phase": failed["phase"], "exit_code": failed["exit_code"], "at": now}
        else:
            rec.notes["training_exit"] = {"phase": states[0].phase, "exit_code": states[0].exit_code, "at": now}
        return True
    live = [(host_key(i), h) for i, (h, s) in enumerate(zip(handles, states, strict=True), 1) if not _ended(s)]
    if failed is not None or rec.secondary == S.Stopping:
        for key, handle in live:
            changed |= signal(rec, key, handle, now)
        return changed
    running = next((s for s in states if not _ended(s)), states[0])
    stage = STAGES.get(states[0].stage or running.stage or "", S.Starting if running.phase == "pending" else S.Downloading)
    changed |= advance(rec, stage, now)
    limit = rec.spec.get("StoppingCondition", {}).get("MaxRuntimeInSeconds")
    # Counted from the container's start: a pod waiting for a node or an image (Kubernetes) is
    # not running yet; the runtime's own timeouts bound that wait.
    started = rec.training_start_time or rec.creation_time
    if limit and running.phase != "pending" and now - started > float(limit):
        rec.notes["max_runtime_exceeded"] = True
        changed |= request_stop(rec, f"Training job exceeded MaxRuntimeInSeconds ({limit} s)", now)
        for key, handle in live:
            changed |= signal(rec, key, handle, now)
    return changed
