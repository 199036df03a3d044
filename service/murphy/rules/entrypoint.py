"""``murphy rule-eval`` / ``python -m murphy.rules``: what one rule container runs.

Configured like a SageMaker rule container (RuleParameters string map, base trial location,
result location); see ``rule_containers/README.md`` for the full contract. Writes
``<result-dir>/result.json`` at the end and ``<result-dir>/heartbeat.json`` while running.

Exit codes: 0 IssuesFound / NoIssuesFound, 1 Error, 2 bad command line (no result written),
128 + signal number when stopped by SIGTERM / SIGINT (result status ``Stopped``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from murphy.rules.actions import Action, parse_actions
from murphy.rules.binding import RuleSpec, check_parameters, construct, split_parameters
from murphy.rules.custom import load_custom_rule
from murphy.rules.engine import Outcome, evaluate_rule
from murphy.rules.params import RuleParameterError
from murphy.rules.registry import lookup
from murphy.rules.result import RESULT_KEY, Heartbeat, put_json, result_dict, utc_now
from murphy.rules.shim import smdebug_shim
from murphy.storage import gateway, open_store

log = logging.getLogger("murphy.rules.entrypoint")

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2

# flag dest → environment variable consulted when the flag is absent.
ENV = {
    "rule_parameters": "MURPHY_RULE_PARAMETERS",
    "base_trial": "MURPHY_BASE_TRIAL",
    "result_dir": "MURPHY_RESULT_PATH",
    "rule_name": "MURPHY_RULE_NAME",
    "training_job_name": "MURPHY_TRAINING_JOB_NAME",
    "poll_interval": "MURPHY_POLL_INTERVAL",
    "heartbeat_interval": "MURPHY_HEARTBEAT_INTERVAL",
    "idle_timeout": "MURPHY_IDLE_TIMEOUT",
}


class UsageError(Exception):
    """The command line / environment is unusable (exit 2, no result file)."""


class StopRequested(BaseException):
    """Raised by the signal handler; a BaseException so no rule's ``except Exception`` eats it."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by signal {signal.Signals(signum).name}")
        self.signum = signum


@dataclass
class RunConfig:
    """Everything one rule-eval run needs (see ``rule_containers/README.md``)."""

    rule_parameters: str
    result_dir: str
    base_trial: str | None = None
    rule_name: str | None = None
    training_job_name: str | None = None
    poll_interval: float = 0.1
    heartbeat_interval: float = 5.0
    idle_timeout: float | None = None
    start_step: int | None = None
    end_step: int | None = None
    all_findings: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def build_parser(prog: str = "murphy rule-eval") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Evaluate one rule over a training job's tensors (one rule container).")
    p.add_argument("--rule-parameters", help="RuleParameters: a JSON object, or @FILE holding one [MURPHY_RULE_PARAMETERS]")
    p.add_argument("--base-trial", help="the training job's debug output: path, file://, s3:// [MURPHY_BASE_TRIAL]")
    p.add_argument("--result-dir", help="where result.json and heartbeat.json go: path or s3:// [MURPHY_RESULT_PATH]")
    p.add_argument("--rule-name", help="RuleConfigurationName (default: rule_to_invoke) [MURPHY_RULE_NAME]")
    p.add_argument("--training-job-name", help="exact job a stoptraining action stops [MURPHY_TRAINING_JOB_NAME]")
    p.add_argument("--poll-interval", type=float, help="seconds between looks for new steps (default 0.1) [MURPHY_POLL_INTERVAL]")
    p.add_argument("--heartbeat-interval", type=float, help="seconds between heartbeats (default 5) [MURPHY_HEARTBEAT_INTERVAL]")
    p.add_argument("--idle-timeout", type=float, help="end after this many seconds without new steps or end marker (default: never) [MURPHY_IDLE_TIMEOUT]")
    p.add_argument("--start-step", type=int, help="first global step (overrides RuleParameters start_step)")
    p.add_argument("--end-step", type=int, help="exclusive last global step (overrides RuleParameters end_step)")
    p.add_argument("--all-findings", action="store_true", help="keep evaluating after the first finding and report every one")
    return p


def _number(value: str | None, what: str, default: float | None) -> float | None:
    if value is None or value == "":
        return default
    try:
        x = float(value)
    except ValueError:
        raise UsageError(f"{what}={value!r} is not a number") from None
    if x < 0:
        raise UsageError(f"{what}={value!r} must not be negative")
    return x


def config_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> RunConfig:
    """Flags first, then the environment variables in :data:`ENV`."""
    def get(dest: str) -> Any:
        v = getattr(args, dest, None)
        return v if v is not None else environ.get(ENV[dest])

    params, result_dir = get("rule_parameters"), get("result_dir")
    if not params:
        raise UsageError("no RuleParameters: pass --rule-parameters JSON|@FILE or set MURPHY_RULE_PARAMETERS")
    if not result_dir:
        raise UsageError("no result location: pass --result-dir PATH|URI or set MURPHY_RESULT_PATH")
    poll = _number(None if get("poll_interval") is None else str(get("poll_interval")), "poll interval", 0.1)
    beat = _number(None if get("heartbeat_interval") is None else str(get("heartbeat_interval")), "heartbeat interval", 5.0)
    idle = _number(None if get("idle_timeout") is None else str(get("idle_timeout")), "idle timeout", None)
    return RunConfig(
        rule_parameters=str(params),
        result_dir=str(result_dir),
        base_trial=get("base_trial"),
        rule_name=get("rule_name"),
        training_job_name=get("training_job_name"),
        poll_interval=poll if poll is not None else 0.1,
        heartbeat_interval=max(beat if beat is not None else 5.0, 0.05),
        idle_timeout=idle,
        start_step=args.start_step,
        end_step=args.end_step,
        all_findings=bool(args.all_findings),
    )


def parse_rule_parameters(text: str) -> dict[str, Any]:
    """RuleParameters from JSON text or ``@file``; must be a JSON object."""
    source = "RuleParameters"
    if text.startswith("@"):
        source = text[1:]
        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise RuleParameterError(f"cannot read RuleParameters file {source}: {e.strerror or e}") from None
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise RuleParameterError(f"{source} is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise RuleParameterError(f"{source} must be a JSON object of strings, got {type(doc).__name__}")
    return doc


def _open_trial(uri: str, config: RunConfig) -> Any:
    from murphy.trial import create_trial

    try:
        return create_trial(uri, poll_interval=config.poll_interval, no_marker_timeout=config.idle_timeout)
    except Exception as e:
        raise RuleParameterError(f"cannot open trial {uri}: {type(e).__name__}: {e}") from e


class _Evaluation:
    """One run's state, so the result can name the rule even when configuration fails."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.spec: RuleSpec | None = None
        self.actions: list[Action] = []
        self.rule_label = config.rule_name or "rule"
        self.base_trial: str | None = config.base_trial

    def run(self, heartbeat: Heartbeat, should_stop: Callable[[], bool] | None) -> Outcome:
        cfg = self.config
        self.spec = spec = split_parameters(parse_rule_parameters(cfg.rule_parameters))
        if cfg.rule_name is None:
            self.rule_label = heartbeat.rule_name = spec.rule_to_invoke
        self.actions = parse_actions(spec.action_json, cfg.training_job_name)
        with ExitStack() as stack:
            if spec.source_uri:
                stack.enter_context(smdebug_shim())
                cls = load_custom_rule(spec.source_uri, spec.rule_to_invoke)
            else:
                cls = lookup(spec.rule_to_invoke)
            name = cls.__name__
            check_parameters(cls, name, spec.params, other_trials=len(spec.other_trials))
            self.base_trial = cfg.base_trial or spec.base_trial
            if not self.base_trial:
                raise RuleParameterError("no base trial: pass --base-trial URI or set MURPHY_BASE_TRIAL")
            trial = _open_trial(self.base_trial, cfg)
            others = [_open_trial(uri, cfg) for uri in spec.other_trials]
            rule = construct(cls, name, trial, spec.params, others)
            start = cfg.start_step if cfg.start_step is not None else (spec.start_step or 0)
            end = cfg.end_step if cfg.end_step is not None else spec.end_step
            log.info("rule %s (%s) on %s from step %d", self.rule_label, name, self.base_trial, start)
            return evaluate_rule(
                rule, start, end,
                stop_at_first=not cfg.all_findings,
                poll_interval=cfg.poll_interval,
                should_stop=should_stop,
                progress=heartbeat.progress,
                idle_timeout=cfg.idle_timeout,
            )


def _error(label: str, reason: str) -> Outcome:
    return Outcome("Error", message=f"{label}: {reason}", reason=reason)


def run(
    config: RunConfig,
    *,
    should_stop: Callable[[], bool] | None = None,
    on_evaluated: Callable[[], None] | None = None,
) -> tuple[dict[str, Any], int]:
    """Evaluate, write ``result.json`` (and heartbeats), return ``(result document, exit code)``.

    Never raises for a rule or configuration problem: those become status ``Error``. A
    :class:`StopRequested` raised inside (by the signal handler) becomes ``Stopped``.
    ``on_evaluated()`` is called once evaluation is over, before the result is written.
    """
    started_at = utc_now()
    store = open_store(config.result_dir)
    ev = _Evaluation(config)
    heartbeat = Heartbeat(store, ev.rule_label, config.heartbeat_interval)
    heartbeat.start()
    code = EXIT_OK
    try:
        outcome = ev.run(heartbeat, should_stop)
    except StopRequested as e:
        outcome = Outcome(
            "Stopped", message=f"{ev.rule_label}: {e}", reason=str(e),
            steps_evaluated=heartbeat.steps_evaluated, last_step=heartbeat.last_step,
        )
        code = 128 + e.signum
    except RuleParameterError as e:
        outcome = _error(ev.rule_label, str(e))
    except Exception as e:
        log.exception("rule-eval failed")
        outcome = _error(ev.rule_label, f"{type(e).__name__}: {e}")
    if on_evaluated is not None:
        on_evaluated()
    if outcome.status == "Error":
        code = EXIT_ERROR
    elif outcome.status == "Stopped" and code == EXIT_OK:
        code = 128 + signal.SIGTERM
    heartbeat.stop(outcome.status)
    doc = result_dict(
        outcome,
        rule_name=ev.rule_label,
        rule_to_invoke=ev.spec.rule_to_invoke if ev.spec else None,
        actions=ev.actions,
        started_at=started_at,
        training_job_name=config.training_job_name,
        base_trial=ev.base_trial,
    )
    put_json(store, RESULT_KEY, doc)
    return doc, code


def _install_signal_handlers(stop: threading.Event) -> tuple[Callable[[], None], Callable[[], None]]:
    """SIGTERM/SIGINT raise :class:`StopRequested` in the main thread (so even a rule blocked
    in a wait stops). Returns ``(disarm, restore)``: ``disarm`` turns raising off (before the
    result is written), ``restore`` puts the previous handlers back."""
    raising = [True]

    def handler(signum: int, _frame: FrameType | None) -> None:
        stop.set()
        if raising[0]:
            raising[0] = False
            raise StopRequested(signum)

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)

    def disarm() -> None:
        raising[0] = False

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return disarm, restore


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    gateway.start_from_env(environ)
    try:
        config = config_from_args(args, os.environ if environ is None else environ)
    except UsageError as e:
        print(f"murphy rule-eval: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    stop = threading.Event()
    disarm, restore = _install_signal_handlers(stop)
    try:
        doc, code = run(config, should_stop=stop.is_set, on_evaluated=disarm)
    except StopRequested as e:  # arrived between evaluation and the result write
        log.warning("%s while writing the result", e)
        return 128 + e.signum
    except Exception as e:  # the result location itself is unusable
        print(f"murphy rule-eval: error: cannot write to {config.result_dir}: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        disarm()
        restore()
    print(f"{doc['status']}: {doc['message']}")
    return code
