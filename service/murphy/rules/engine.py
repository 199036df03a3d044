"""The rule engine: evaluate one rule over a trial's steps as they appear, return an ``Outcome``.

smdebug's :func:`~murphy.rules.invoker.invoke_rule` walks every integer step and signals results
with exceptions (``RuleEvaluationConditionMet``, ``NoMoreData``). :func:`evaluate_rule` walks only
the steps the trial actually saved (its step list, refreshed every ``poll_interval``), and returns
one value saying what happened: found at step S (with the rule's finding), no issues, an error with
its reason, or stopped by the caller. It never raises for anything the rule does.

Rules written against the real ``smdebug`` package (no ``evaluate``) are driven through their
``invoke``; exceptions are classified by class name so smdebug's own classes work too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from murphy.rules.rule import Finding
from murphy.trial import no_refresh

log = logging.getLogger(__name__)

OutcomeStatus = Literal["IssuesFound", "NoIssuesFound", "Error", "Stopped"]

# smdebug's "this step has nothing for the rule" errors: the step is skipped, as invoke_rule does.
_SKIP = frozenset({"TensorUnavailableForStep", "StepUnavailable", "TensorUnavailable"})


@dataclass(frozen=True)
class Outcome:
    """What one rule evaluation found.

    ``status`` is SageMaker's ``RuleEvaluationStatus`` vocabulary. For ``IssuesFound``,
    ``step``/``message``/``tensor``/``value`` describe the first finding and ``findings`` holds
    every finding (one when stopping at the first). ``reason`` explains ``Error`` (and, for other
    statuses, how evaluation ended when that is worth knowing). ``last_step`` is the last step
    evaluated.
    """

    status: OutcomeStatus
    step: int | None = None
    message: str = ""
    tensor: str | None = None
    value: float | None = None
    findings: tuple[Finding, ...] = ()
    reason: str | None = None
    steps_evaluated: int = 0
    last_step: int | None = None


def _kind(exc: BaseException) -> str | None:
    """smdebug exception name of ``exc`` (murphy's or real smdebug's class), else None."""
    for cls in type(exc).__mro__:
        if cls.__name__ in _SKIP or cls.__name__ in ("NoMoreData", "RuleEvaluationConditionMet"):
            return cls.__name__
    return None


class _Run:
    """Mutable state of one evaluation; :meth:`outcome` freezes it."""

    def __init__(self, rule: Any) -> None:
        self.rule = rule
        self.rule_name = str(getattr(rule, "rule_name", type(rule).__name__))
        self.findings: list[Finding] = []
        self.steps_evaluated = 0
        self.last_step: int | None = None

    def outcome(self, status: OutcomeStatus, message: str = "", reason: str | None = None) -> Outcome:
        if self.findings and status != "Error":
            first = self.findings[0]
            return Outcome(
                "IssuesFound" if status != "Stopped" else "Stopped",
                first.step, first.message, first.tensor, first.value,
                tuple(self.findings), reason, self.steps_evaluated, self.last_step,
            )
        return Outcome(
            status, None, message, None, None, tuple(self.findings), reason,
            self.steps_evaluated, self.last_step,
        )

    def evaluate(self, step: int) -> bool:
        """One step through ``Rule.evaluate``, or ``invoke`` for a real-smdebug rule."""
        rule = self.rule
        if hasattr(rule, "evaluate"):
            return bool(rule.evaluate(step))
        try:
            rule.invoke(step)
        except Exception as e:
            if _kind(e) == "RuleEvaluationConditionMet":
                return True
            raise
        return False

    def finding_for(self, step: int) -> Finding:
        finding = getattr(self.rule, "finding", None)
        if isinstance(finding, Finding):
            return finding
        return Finding(step, f"{self.rule_name}: condition met at step {step}")


def evaluate_rule(
    rule: Any,
    start_step: int = 0,
    end_step: int | None = None,
    *,
    stop_at_first: bool = True,
    poll_interval: float = 0.1,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[int | None, int], None] | None = None,
    idle_timeout: float | None = None,
) -> Outcome:
    """Evaluate ``rule`` at each saved global step in ``[start_step, end_step)`` as it appears.

    Steps come from the base trial's step list (complete steps only), refreshed every
    ``poll_interval`` seconds while none is pending, so step numbers that were never saved cost
    nothing. A step where the rule hits ``TensorUnavailableForStep`` / ``StepUnavailable`` /
    ``TensorUnavailable`` is skipped. The first step where the rule fires ends the evaluation
    with ``IssuesFound`` unless ``stop_at_first`` is False (then every finding is collected).
    Evaluation ends with ``NoIssuesFound`` once training has ended and every step is consumed
    (or ``end_step`` is passed, or the rule itself meets ``NoMoreData``); any other exception
    from the rule gives ``Error`` with ``"<ExceptionType>: <message>"`` as reason.

    ``should_stop()`` is checked before each step and each poll: True ends with ``Stopped``.
    ``progress(last_step, steps_evaluated)`` is called after each step and each poll (the
    heartbeat). ``idle_timeout``: give up (``NoIssuesFound`` with a reason) after that many
    seconds without a new step and without the end-of-training marker (a dead training job).
    """
    run = _Run(rule)
    trial = rule.base_trial
    next_step = start_step
    idle_since = time.monotonic()
    try:
        while True:
            # One incremental refresh per round (at its end, after the sleep); the queries here
            # read that view instead of each asking the store again, as a direct query would.
            with no_refresh([trial]):
                pending = [s for s in trial.steps() if s >= next_step and (end_step is None or s < end_step)]
            ended = bool(trial.loaded_all_steps)
            for step in pending:
                if should_stop is not None and should_stop():
                    return run.outcome("Stopped", f"{run.rule_name}: stopped", "stopped by request")
                next_step = step + 1
                done = _evaluate_step(run, step, stop_at_first)
                if progress is not None:
                    progress(run.last_step, run.steps_evaluated)
                if done is not None:
                    return done
            if pending:
                idle_since = time.monotonic()
            with no_refresh([trial]):
                past_end = _past_end(trial, end_step, next_step)
            if past_end:
                return _no_more(run, f"reached end_step {end_step}")
            if ended:
                return _no_more(run, "training has ended")
            # _stalled records the finding even when evaluation goes on (stop_at_first=False).
            with no_refresh([trial]):
                stalled = not pending and _stalled(run)
            if stalled and stop_at_first:
                return run.outcome("IssuesFound")
            if should_stop is not None and should_stop():
                return run.outcome("Stopped", f"{run.rule_name}: stopped", "stopped by request")
            if idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
                return _no_more(run, f"no new step and no end-of-training marker for {idle_timeout:g} s")
            if progress is not None:
                progress(run.last_step, run.steps_evaluated)
            time.sleep(poll_interval)
            trial.refresh()
    except Exception as e:  # the trial itself failed (store unreachable, corrupt collections ...)
        log.exception("rule %s: evaluation failed", run.rule_name)
        return run.outcome("Error", f"{run.rule_name}: evaluation failed", f"{type(e).__name__}: {e}")


def _evaluate_step(run: _Run, step: int, stop_at_first: bool) -> Outcome | None:
    """Evaluate one step; an ``Outcome`` when evaluation must end here, else None."""
    try:
        fired = run.evaluate(step)
    except Exception as e:
        kind = _kind(e)
        if kind in _SKIP:
            log.debug("rule %s: step %d skipped: %s", run.rule_name, step, e)
            return None
        if kind == "NoMoreData":
            log.debug("rule %s: no more data at step %d: %s", run.rule_name, step, e)
            return _no_more(run, f"the rule reached the end of the data at step {step}: {e}")
        if kind == "RuleEvaluationConditionMet":  # a custom rule raised it itself
            fired = True
        else:
            log.info("rule %s: error at step %d", run.rule_name, step, exc_info=True)
            return run.outcome(
                "Error", f"{run.rule_name}: error at step {step}", f"{type(e).__name__}: {e}"
            )
    run.steps_evaluated += 1
    run.last_step = step
    if not fired:
        return None
    finding = run.finding_for(step)
    run.findings.append(finding)
    log.info("rule %s fired at step %d: %s", run.rule_name, step, finding.message)
    return run.outcome("IssuesFound") if stop_at_first else None


def _stalled(run: _Run) -> bool:
    """Rules that watch for *absence* of data (StalledTrainingRule) expose ``check_stalled``,
    asked on every idle poll, since no step would ever arrive to call ``invoke_at_step`` with."""
    check = getattr(run.rule, "check_stalled", None)
    if check is None or not check():
        return False
    finding = run.rule.finding
    run.findings.append(finding)
    log.info("rule %s fired while idle: %s", run.rule_name, finding.message)
    return True


def _past_end(trial: Any, end_step: int | None, next_step: int) -> bool:
    """True when no step before ``end_step`` can still come."""
    if end_step is None:
        return False
    if next_step >= end_step:
        return True
    state = trial.has_passed_step(end_step - 1)
    return str(getattr(state, "name", state)) != "NOT_YET_AVAILABLE"


def _no_more(run: _Run, why: str) -> Outcome:
    if run.findings:
        return run.outcome("IssuesFound", reason=why)
    last = "" if run.last_step is None else f", last step {run.last_step}"
    message = f"{run.rule_name}: no issues found ({run.steps_evaluated} steps evaluated{last})"
    return run.outcome("NoIssuesFound", message, why)
