"""The supervisor: a level-triggered reconcile loop that launches, watches and finishes jobs.

Each pass reads every non-terminal job from the store, compares what was asked with what the
runtime and the rule result files say, acts (launch, signal, kill) and writes the new status back
with optimistic concurrency. It keeps nothing in memory that a restart would lose: handles, stop
times and exit facts live on the record, so a new supervisor picks up where a killed one stopped.

Lifecycle of a job (see docs/control-plane.md):
  Starting → (training + one rule evaluator per rule launched) → Downloading → Training →
  Uploading (training exited 0; rules finish the remaining steps) → Completed,
  or Stopping → Stopped (user, a rule finding, an action) / MaxRuntimeExceeded, or Failed.
A job reaches its terminal status only when every rule has one too, so a client that sees
``Completed`` also sees every rule's final verdict, and only when every container it launched
(or may have launched) is confirmed gone: exited, or never created (docs/runtimes.md, "The stop
guarantee"). Launch and stop of a job are ordered by :mod:`murphy.jobs.launch`; between passes
the :class:`~murphy.jobs.reconciler.Reconciler` stops what no live job accounts for.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable

from murphy.exceptions import (
    ConcurrentUpdate,
    JobNotFound,
    MurphyError,
    ObjectNotFound,
    RuntimeBackendError,
)
from murphy.jobs import launch
from murphy.jobs.model import JobRecord, RuleEvaluationStatus, RuleState, SecondaryStatus
from murphy.jobs.plans import open_uri, tensor_uri
from murphy.jobs.progress import MAX_REASON, STAGES, advance, bare, failure_reason
from murphy.jobs.reconciler import Reconciler
from murphy.jobs.service import mutate, request_stop
from murphy.runtimes.base import ContainerState, Handle, Runtime
from murphy.settings import Settings
from murphy.storage import ObjectStore
from murphy.store.base import JobStore

log = logging.getLogger(__name__)
S = SecondaryStatus
R = RuleEvaluationStatus


class Supervisor:
    def __init__(self, store: JobStore, runtime: Runtime, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.runtime = runtime
        self.settings = settings
        self.clock = clock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: One store per result location: opening an S3 store resolves credentials and builds a
        #: connection pool, too costly to repeat every pass.
        self._stores: dict[str, ObjectStore] = {}
        #: (job, rule) -> when its result.json was last read while its container ran.
        self._result_reads: dict[tuple[str, str], float] = {}
        self.reconciler = Reconciler(store, runtime)

    # --- loop ----------------------------------------------------------------------------

    def start(self) -> None:
        if self.settings.test_crash_after_launch:
            log.warning("MURPHY_TEST_CRASH_AFTER_LAUNCH is set (fault injection, tests only): this service "
                        "kills itself right after its next launch")
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="murphy-supervisor", daemon=True)
            self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def wake(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        next_sweep = 0.0  # at start: what a crash left is dealt with before the first pass
        while not self._stop.is_set():
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + self.settings.reconciler_interval_s
                try:
                    self.reconciler.sweep()
                except Exception:
                    log.exception("reconciler sweep failed")
            try:
                self.run_once()
            except Exception:  # the loop must outlive any one bad pass
                log.exception("supervisor pass failed")
            self._wake.wait(self.settings.reconcile_interval_s)
            self._wake.clear()

    def run_once(self) -> None:
        for record in self.store.active():
            try:
                self.reconcile(record)
            except ConcurrentUpdate:
                continue  # someone else wrote first; the next pass sees their change
            except JobNotFound:
                continue
            except Exception:
                log.exception("reconciling %s failed", record.name)

    # --- one job ---------------------------------------------------------------------------

    def reconcile(self, rec: JobRecord) -> None:
        now = self.clock()
        changed = False
        if rec.secondary == S.Stopping:
            settled = launch.settle_unlaunched(self.runtime, rec, now)
            if settled is None:
                return  # something the record does not hold still runs: the next pass looks again
            changed |= settled
        elif launch.missing(rec):
            fresh = self.store.get(rec.name)
            if fresh.version != rec.version:  # the pass's copy may predate a stop: never launch a stopped job
                return self.reconcile(fresh)
            rec = self._launch(rec, now)
            if rec.is_terminal():
                self._release(rec)
                return
        changed |= self._watch_rules(rec, now)
        changed |= self._watch_training(rec, now)
        changed |= self._finish(rec, now)
        if changed:
            saved = self.store.update(rec)
            if saved.is_terminal():
                self._release(saved)

    def _release(self, rec: JobRecord) -> None:
        """Free the containers of a finished job (the runtime keeps their logs)."""
        for handle in (rec.training, *(r.handle for r in rec.rules)):
            if handle is None:
                continue
            try:
                self.runtime.remove(handle)
            except Exception:  # a leftover container must not fail the job's bookkeeping
                log.exception("cannot release container %s of %s", handle.id, rec.name)

    def _launch(self, rec: JobRecord, now: float) -> JobRecord:
        """Launch what is missing and record it on the current record: a stop written during
        the launch then finds the handles and stops what was started."""
        out = launch.launch_missing(self.runtime, rec, self.settings)
        if self.settings.test_crash_after_launch and out.handles():
            log.warning("MURPHY_TEST_CRASH_AFTER_LAUNCH: killing this service before %s's handles are recorded", rec.name)
            os.kill(os.getpid(), signal.SIGKILL)
        failed = launch.failed_names(rec, out)
        if failed:  # a failed launch may have created its container anyway: it must not run
            try:
                launch.clear_unrecorded(self.runtime, rec, "its launch failed", failed)
            except RuntimeBackendError as e:  # what did start must still be recorded; the reconciler retries
                log.warning("cannot look for what the failed launch of %s left: %s", rec.name, e)
        launch.apply_launch(rec, out, now)
        try:
            return self.store.update(rec)  # handles first: a crash now re-attaches, never relaunches twice
        except ConcurrentUpdate:  # a stop (or tags) came in during the launch: keep theirs, add ours
            return mutate(self.store, rec.name, lambda fresh: launch.apply_launch(fresh, out, now))

    # --- rules ---------------------------------------------------------------------------

    def _store(self, uri: str) -> ObjectStore:
        store = self._stores.get(uri)
        if store is None:
            if len(self._stores) > 1024:  # finished jobs' locations are never read again
                self._stores.clear()
            store = self._stores[uri] = open_uri(self.settings, uri)
        return store

    def _read_result(self, rule: RuleState) -> dict[str, object] | None:
        if not rule.result_uri:
            return None
        try:
            raw = self._store(rule.result_uri).get("result.json")
            result = json.loads(raw)
        except ObjectNotFound:
            return None
        except (MurphyError, ValueError) as e:
            return {"status": "Error", "reason": f"unreadable result file: {e}"}
        return result if isinstance(result, dict) else {"status": "Error", "reason": "result file is not a JSON object"}

    def _result_due(self, rec: JobRecord, rule: RuleState, now: float) -> bool:
        key = (rec.name, rule.name)
        last = self._result_reads.get(key)
        if last is not None and 0 <= now - last < self.settings.rule_result_poll_s:  # (clock set back: due)
            return False
        if len(self._result_reads) > 4096:  # finished jobs' entries are never looked at again
            self._result_reads.clear()
        self._result_reads[key] = now
        return True

    def _watch_rules(self, rec: JobRecord, now: float) -> bool:
        changed = False
        for rule in rec.rules:
            if rule.status not in (R.InProgress, R.Stopping) or rule.handle is None:
                continue
            # The container's state first: it is local and cheap, while result.json may be an
            # S3 GET. The result is written before the exit, so reading it after seeing the exit
            # never misses it; while the container runs it is read only now and then.
            state = self.runtime.status(rule.handle)
            ended = state.phase in ("exited", "missing")
            if ended:
                changed |= self._gone(rec, f"rule:{rule.name}", rule.handle, state)
            result = self._read_result(rule) if ended or self._result_due(rec, rule, now) else None
            if result is not None:
                changed |= self._apply_result(rec, rule, result, now)
            elif ended:
                if rule.status == R.Stopping:
                    changed |= rule.set_status(R.Stopped, "Rule evaluation was stopped.", now)
                else:
                    why = "vanished" if state.phase == "missing" else f"exited with code {state.exit_code}"
                    tail = f": {state.log_tail.strip()[-600:]}" if state.log_tail.strip() else ""
                    changed |= rule.set_status(R.Error, f"The rule evaluator {why} without a result{tail}", now)
            elif rule.status == R.Stopping:
                changed |= self._signal(rec, f"rule:{rule.name}", rule.handle, now)
        return changed

    def _apply_result(self, rec: JobRecord, rule: RuleState, result: dict[str, object], now: float) -> bool:
        status = str(result.get("status"))
        rule.result = result
        if status == "IssuesFound":
            step = result.get("step")
            message = bare(str(result.get("message") or ""), rule, result)
            details = f"RuleEvaluationConditionMet: Evaluation of the rule {rule.name} at step {step} resulted in the condition being met. {message}".strip()
            changed = rule.set_status(R.IssuesFound, details, now)
            changed |= self._on_finding(rec, rule, result, now)
            return changed
        if status == "NoIssuesFound":
            return rule.set_status(R.NoIssuesFound, str(result.get("reason") or "No issues found."), now)
        if status == "Stopped":
            return rule.set_status(R.Stopped, str(result.get("reason") or "Rule evaluation was stopped."), now)
        reason = str(result.get("message") or result.get("reason") or "the rule evaluator reported an error")
        return rule.set_status(R.Error, reason, now)

    def _on_finding(self, rec: JobRecord, rule: RuleState, result: dict[str, object], now: float) -> bool:
        actions = result.get("actions") or []
        has_actions = bool(actions) or any(
            "action_json" in (c.get("RuleParameters") or {})
            for c in rec.spec.get("DebugRuleConfigurations", []) if c["RuleConfigurationName"] == rule.name
        )
        exit_info = rec.notes.get("training_exit")
        if exit_info is not None and exit_info.get("exit_code") != 0:
            return False  # training already failed on its own: the job ends Failed, the rule keeps its verdict
        message = bare(str(result.get("message") or ""), rule, result) or "found issues"
        reason = f"Training job stopped by rule {rule.name}: {message}"[:MAX_REASON]
        if has_actions:
            changed = False
            for action in actions if isinstance(actions, list) else []:
                if not isinstance(action, dict):
                    continue
                if action.get("name") == "stoptraining" and action.get("training_job_name") == rec.name:
                    changed |= request_stop(rec, reason, now)
                elif action.get("name") in ("email", "sms"):
                    rec.notes.setdefault("notifications", []).append({**action, "rule": rule.name, "at": now})
                    log.warning("rule %s of %s asks to notify %s %s (delivery comes with events)",
                                rule.name, rec.name, action.get("name"), action.get("endpoint"))
                    changed = True
            return changed
        if self.settings.stop_on_finding:
            return request_stop(rec, reason, now)
        return False

    # --- training ------------------------------------------------------------------------

    def _signal(self, rec: JobRecord, key: str, handle: Handle, now: float) -> bool:
        """SIGTERM once, SIGKILL after the grace period; the times live in ``rec.notes``."""
        sent = rec.notes.setdefault("signals", {})
        entry = sent.get(key)
        if entry is None:
            self.runtime.stop(handle)
            sent[key] = {"term": now}
            return True
        if "kill" not in entry and now - entry["term"] >= self.settings.stop_grace_s:
            self.runtime.stop(handle, force=True)
            entry["kill"] = now
            return True
        return False

    def _watch_training(self, rec: JobRecord, now: float) -> bool:
        if rec.training is None or "training_exit" in rec.notes:
            return False
        state = self.runtime.status(rec.training)
        changed = False
        if state.phase in ("exited", "missing"):
            self._gone(rec, "training", rec.training, state)
            rec.notes["training_exit"] = {"phase": state.phase, "exit_code": state.exit_code, "at": now}
            if state.exit_code != 0 and rec.secondary != S.Stopping:
                rec.failure_reason = failure_reason(state)
            if state.phase == "missing" or state.exit_code != 0:
                self._write_end_marker(rec)
            return True
        if rec.secondary == S.Stopping:
            return self._signal(rec, "training", rec.training, now)
        stage = STAGES.get(state.stage or "", S.Starting if state.phase == "pending" else S.Downloading)
        changed |= advance(rec, stage, now)
        limit = rec.spec.get("StoppingCondition", {}).get("MaxRuntimeInSeconds")
        # Counted from the container's start: a pod waiting for a node or an image (Kubernetes)
        # is not running yet; the runtime's own timeouts bound that wait.
        started = rec.training_start_time or rec.creation_time
        if limit and state.phase != "pending" and now - started > float(limit):
            rec.notes["max_runtime_exceeded"] = True
            changed |= request_stop(rec, f"Training job exceeded MaxRuntimeInSeconds ({limit} s)", now)
            changed |= self._signal(rec, "training", rec.training, now)
        return changed

    def _write_end_marker(self, rec: JobRecord) -> None:
        """A container that died cannot close its trial: write the marker for it, so the rules
        consume what was saved and finish instead of waiting forever."""
        uri = tensor_uri(rec)
        if uri is None:
            return
        try:
            store = open_uri(self.settings, uri)
            if not store.exists("training_job_end.ts"):
                store.put("training_job_end.ts", b"")
        except MurphyError as e:
            log.warning("cannot write the end marker for %s: %s", rec.name, e)

    # --- the stop guarantee ---------------------------------------------------------------

    def _gone(self, rec: JobRecord, key: str, handle: Handle, state: ContainerState) -> bool:
        """Note that the container ``key`` ended. A ``missing`` one may have left processes
        behind (the process runtime: its program's group outlives a killed shim): they are
        killed first, so that "ended" means nothing of it runs."""
        ended = rec.notes.setdefault("ended", [])
        if key in ended:
            return False
        if state.phase == "missing":
            self.runtime.stop(handle, force=True)
        ended.append(key)
        return True

    def _lingering(self, rec: JobRecord, now: float) -> bool | None:
        """None when every container of the job is gone; else whether signalling one that
        still runs changed the record. A rule whose verdict came while its container ran is
        asked here, once, and stopped like any other (SIGTERM, SIGKILL after the grace)."""
        ended = rec.notes.setdefault("ended", [])
        waiting, changed = False, False
        for rule in rec.rules:
            key = f"rule:{rule.name}"
            if rule.handle is None or key in ended:
                continue
            state = self.runtime.status(rule.handle)
            if state.phase in ("exited", "missing"):
                changed |= self._gone(rec, key, rule.handle, state)
            else:
                waiting = True
                changed |= self._signal(rec, key, rule.handle, now)
        return changed if waiting else None

    # --- finishing -----------------------------------------------------------------------

    def _finish(self, rec: JobRecord, now: float) -> bool:
        exit_info = rec.notes.get("training_exit")
        if exit_info is None:
            return False
        changed = False
        pending = [r for r in rec.rules if r.status in (R.InProgress, R.Stopping)]
        if pending and rec.secondary != S.Stopping:
            if exit_info.get("exit_code") == 0:
                changed |= advance(rec, S.Uploading, now)
            if now - exit_info["at"] > self.settings.rule_finish_timeout_s:
                for rule in pending:
                    changed |= rule.set_status(R.Stopping, "Training ended; rule evaluation ran out of time.", now)
        if rec.secondary == S.Stopping:
            for rule in pending:
                if rule.status == R.InProgress:
                    changed |= rule.set_status(R.Stopping, None, now)
        if any(r.status in (R.InProgress, R.Stopping) for r in rec.rules):
            return changed
        lingering = self._lingering(rec, now)
        if lingering is not None:
            return changed | lingering
        if rec.secondary == S.Stopping:
            final = S.MaxRuntimeExceeded if rec.notes.get("max_runtime_exceeded") else S.Stopped
            changed |= rec.transition(final, rec.stop_reason or "Training job stopped", now)
        elif exit_info.get("exit_code") == 0:
            advance(rec, S.Uploading, now)
            changed |= rec.transition(S.Completed, "Training job completed", now)
        else:
            changed |= rec.transition(S.Failed, "Training job failed", now)
            rec.failure_reason = rec.failure_reason or "AlgorithmError: training failed"
        return changed
