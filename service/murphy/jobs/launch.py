"""Launching a job's containers, ordered with its stop.

The supervisor launches from a snapshot of the record while ``StopTrainingJob`` may write the
record at any moment. What a launch started is therefore kept apart (:class:`Launched`) and
written onto the *current* record (:func:`apply_launch`, retried on a concurrent update), so a
stop that arrived during the launch finds the handles and stops what was started: the job never
says ``Stopped`` while a container it launched runs. A launch that failed may still have left
something behind (a container created but not started); :func:`clear_unrecorded` asks the
runtime for it before the job may end.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from murphy.exceptions import MurphyError, RuntimeBackendError
from murphy.jobs.model import JobRecord, RuleEvaluationStatus, SecondaryStatus
from murphy.jobs.plans import containers, rule_plan, training_containers, training_plans
from murphy.jobs.progress import MAX_REASON
from murphy.runtimes.base import Handle, Runtime
from murphy.settings import Settings

log = logging.getLogger(__name__)
R = RuleEvaluationStatus


@dataclass
class Launched:
    """What one launch pass started (handles) and could not start (errors), by container."""

    training: Handle | None = None
    #: ``algo-2`` .. ``algo-N`` (multi-instance jobs): recorded with ``training``, all or none.
    extra_training: list[Handle] = field(default_factory=list)
    training_error: str | None = None
    rules: dict[str, Handle] = field(default_factory=dict)
    rule_errors: dict[str, str] = field(default_factory=dict)

    def handles(self) -> list[Handle]:
        return [h for h in (self.training, *self.extra_training, *self.rules.values()) if h is not None]


def missing(rec: JobRecord) -> bool:
    """Has the job a container to launch (its training, or a debug rule's not started yet)?"""
    return rec.training is None or any(r.kind == "debug" and r.handle is None and r.status == R.InProgress
                                       for r in rec.rules)


def launch_missing(runtime: Runtime, rec: JobRecord, settings: Settings) -> Launched:
    """Launch what the record has no handle for. Launches are idempotent on the container
    name, so after a crash this re-attaches to what the last service started."""
    out = Launched()
    if rec.training is None:
        error = _launch_hosts(runtime, rec, out)
        if error is not None:
            out.training_error = error
            return out
    for i, rule in enumerate(r for r in rec.rules if r.kind == "debug"):
        if rule.handle is not None or rule.status != R.InProgress:
            continue
        try:
            out.rules[rule.name] = runtime.launch(rule_plan(rec, rule, i, settings))
        except (RuntimeBackendError, MurphyError, OSError) as e:
            out.rule_errors[rule.name] = str(e)
    return out


def _launch_hosts(runtime: Runtime, rec: JobRecord, out: Launched) -> str | None:
    """Launch every training host, ``algo-1`` first; the error of the first that cannot start
    (naming the host when there are several), after what did start was killed: a job's hosts
    run all together or not at all."""
    plans = training_plans(rec)
    started: list[Handle] = []
    for plan in plans:
        try:
            started.append(runtime.launch(plan))
        except (RuntimeBackendError, MurphyError, OSError) as e:
            for handle in started:  # its peers would wait for it forever
                try:
                    runtime.stop(handle, force=True)
                    runtime.remove(handle)
                except MurphyError as stop_error:  # clear_unrecorded looks again by name
                    log.warning("cannot stop %s of %s: %s", handle.id, rec.name, stop_error)
            return f"{e} ({plan.current_host})" if len(plans) > 1 else str(e)
    out.training, out.extra_training = started[0], started[1:]
    return None


def apply_launch(rec: JobRecord, out: Launched, now: float) -> bool:
    """Write ``out`` onto ``rec`` (the current record, whatever happened to it meanwhile)."""
    if out.training is not None and rec.training is None:
        rec.training = out.training
        rec.extra_training = list(out.extra_training)
    for rule in rec.rules:
        handle = out.rules.get(rule.name)
        if handle is not None and rule.handle is None:
            rule.handle = handle
        error = out.rule_errors.get(rule.name)
        if error is not None and rule.handle is None and rule.status in (R.InProgress, R.Stopping):
            rule.set_status(R.Error, f"ClientError: cannot start the rule evaluator: {error}", now)
        if rule.kind == "profiler" and rule.status == R.InProgress:
            rule.set_status(R.Error, "murphy does not evaluate profiler rules; nothing was evaluated.", now)
    if out.training_error is not None and rec.training is None:
        rec.notes["training_exit"] = {"phase": "not-started", "exit_code": None, "at": now}
        for rule in rec.rules:
            if rule.status in (R.InProgress, R.Stopping):
                rule.set_status(R.Stopped, "The training job failed before rule evaluation started.", now)
        if rec.secondary != SecondaryStatus.Stopping:
            # A stop that came first is honoured (the job ends Stopped); otherwise it failed.
            rec.failure_reason = f"ClientError: {out.training_error}"[:MAX_REASON]
            rec.transition(SecondaryStatus.Failed, f"Training job failed: {out.training_error}"[:MAX_REASON], now)
    return True


def unrecorded(rec: JobRecord) -> set[str]:
    """The job's container names its record holds no handle for."""
    names = containers(rec)
    return {name for name, rule in names.items()
            if (rule is None and rec.training is None) or (rule is not None and rule.handle is None)}


def clear_unrecorded(runtime: Runtime, rec: JobRecord, why: str, names: set[str] | None = None) -> bool:
    """Kill and remove what the runtime has of ``rec`` under a name its record has no handle
    for (a launch cut short, a crash before the handle was written); True once none is left."""
    names = unrecorded(rec) if names is None else names
    if not names:
        return True
    found = [c for c in runtime.list_containers(rec.name) if c.container_name in names]
    for c in found:
        if c.live:
            log.warning("stopping container %s of %s, which its record does not hold: %s", c.container_name, rec.name, why)
            runtime.stop(c.handle, force=True)
        runtime.remove(c.handle)
    if not found:
        return True
    return not any(c.live for c in runtime.list_containers(rec.name) if c.container_name in names)


def failed_names(rec: JobRecord, out: Launched) -> set[str]:
    """Container names whose launch failed in ``out`` (they may have been created anyway)."""
    names = set(training_containers(rec)) if out.training_error is not None else set()
    by_rule = {rule.name: name for name, rule in containers(rec).items() if rule is not None}
    return names | {by_rule[n] for n in out.rule_errors if n in by_rule}


def settle_unlaunched(runtime: Runtime, rec: JobRecord, now: float) -> bool | None:
    """A stopping job's containers that were never recorded: clear whatever the runtime has
    under their names (a launch a crash cut short), then mark them never started. False when
    there are none, None while something of them still runs."""
    names = containers(rec)
    pending = {name for name, rule in names.items()
               if (rule is None and rec.training is None and "training_exit" not in rec.notes)
               or (rule is not None and rule.handle is None and rule.status in (R.InProgress, R.Stopping))}
    if not pending:
        return False
    if not clear_unrecorded(runtime, rec, "its job was stopped before the launch was recorded", pending):
        return None
    if rec.training is None and "training_exit" not in rec.notes:
        rec.notes["training_exit"] = {"phase": "not-started", "exit_code": None, "at": now}
    not_started = rec.notes.get("training_exit", {}).get("phase") == "not-started"
    for rule in rec.rules:
        if rule.handle is None and rule.status in (R.InProgress, R.Stopping) and (not_started or rule.kind == "debug"):
            rule.set_status(R.Stopped, "The training job was stopped before rule evaluation started.", now)
    return True
