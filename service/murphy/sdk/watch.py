"""Waiting for a training job: its log, its status transitions and the Debugger rule box.

Everything comes from DescribeTrainingJob, DescribeLogStreams and GetLogEvents (the stock
boto3 clients). The log is read like the SageMaker SDK reads it: GetLogEvents with
``nextForwardToken`` until an empty page, per stream. The rule box is the seed article's (SDK
<= 2.18): redrawn in place (rich ``Live``) on a terminal, printed again whenever a status
changes otherwise. murphy polls every 0.5 s instead of the SDK's 30 s.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

TERMINAL = ("Completed", "Failed", "Stopped")
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
_STEP = re.compile(r"\bat step (\d+)\b")


def rule_statuses(description: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Debugger then profiler rule statuses (what ``rule_job_summary()`` returns)."""
    return list(description.get("DebugRuleEvaluationStatuses", [])) + list(
        description.get("ProfilerRuleEvaluationStatuses", [])
    )


def render_rule_box(statuses: Sequence[Mapping[str, Any]]) -> str:
    """The "Debugger Rule Status" box, one ``* {:>18}: {:<18}`` line per rule."""
    lines = ["********* Debugger Rule Status *********", "*"]
    lines += ["* {:>18}: {:<18}".format(s["RuleConfigurationName"], s["RuleEvaluationStatus"]) for s in statuses]
    lines += ["*", "*" * 40]
    return "\n".join(lines)


def _utc(value: Any) -> str:
    if isinstance(value, dt.datetime):
        moment = value.astimezone(dt.timezone.utc)
    elif isinstance(value, (int, float)):
        moment = dt.datetime.fromtimestamp(value, dt.timezone.utc)
    else:
        return str(value or "")
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def transition_line(transition: Mapping[str, Any]) -> str:
    """``YYYY-MM-DD HH:MM:SS <Status> - <StatusMessage>`` (UTC, like the SDK)."""
    return f"{_utc(transition.get('StartTime'))} {transition['Status']} - {transition.get('StatusMessage', '')}"


def fired_step(status_details: str | None) -> int | None:
    """The step a rule's ``StatusDetails`` says it fired at ("... at step N ...")."""
    m = _STEP.search(status_details or "")
    return int(m.group(1)) if m else None


def summary_lines(description: Mapping[str, Any], artifacts_path: str | None) -> list[str]:
    """What a person wants to know once the job ended: status, why, which rule fired where, tensors."""
    name, status = description["TrainingJobName"], description["TrainingJobStatus"]
    lines = [f"Training job {name} ended: {status} ({description.get('SecondaryStatus', status)})"]
    transitions = description.get("SecondaryStatusTransitions") or []
    if transitions and transitions[-1].get("StatusMessage"):
        lines.append(f"  status message: {transitions[-1]['StatusMessage']}")
    if description.get("FailureReason"):
        lines.append(f"  failure reason: {description['FailureReason']}")
    for rule in rule_statuses(description):
        verdict = rule["RuleEvaluationStatus"]
        step = fired_step(rule.get("StatusDetails")) if verdict == "IssuesFound" else None
        where = f" (fired at step {step})" if step is not None else ""
        lines.append(f"  rule {rule['RuleConfigurationName']}: {verdict}{where}")
        if rule.get("StatusDetails") and verdict in ("IssuesFound", "Error"):
            lines.append(f"    {rule['StatusDetails']}")
    if artifacts_path:
        lines.append(f"  tensors: {artifacts_path}")
    if description.get("TrainingTimeInSeconds") is not None:
        lines.append(f"  training seconds: {description['TrainingTimeInSeconds']}")
    return lines


class LogTailer:
    """Reads every new event of a job's log streams (``<job>/...``) on each :meth:`poll`."""

    def __init__(self, logs_client: Any, job_name: str) -> None:
        self.client = logs_client
        self.job_name = job_name
        self.tokens: dict[str, str] = {}

    def poll(self) -> list[tuple[float, str]]:
        """New events as ``(epoch seconds, message)``."""
        try:
            streams = self.client.describe_log_streams(
                logGroupName=LOG_GROUP, logStreamNamePrefix=f"{self.job_name}/", orderBy="LogStreamName"
            )["logStreams"]
        except self.client.exceptions.ResourceNotFoundException:
            return []
        events: list[tuple[float, str]] = []
        for stream in streams:
            name = stream["logStreamName"]
            while True:
                kwargs: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamName": name, "startFromHead": True}
                if name in self.tokens:
                    kwargs["nextToken"] = self.tokens[name]
                page = self.client.get_log_events(**kwargs)
                self.tokens[name] = page["nextForwardToken"]
                if not page["events"]:
                    break
                events += [(e.get("timestamp", 0) / 1000.0, e["message"].rstrip("\n")) for e in page["events"]]
        return events


class PlainView:
    """Lines only: the box is printed again each time a rule status changes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._last_box: str | None = None

    def line(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def rules(self, statuses: Sequence[Mapping[str, Any]]) -> None:
        box = render_rule_box(statuses)
        if statuses and box != self._last_box:
            self._last_box = box
            self.line(box)

    def pause(self) -> None:
        self.out.flush()

    def resume(self) -> None:
        pass

    def close(self) -> None:
        self.out.flush()


class LiveView:
    """On a terminal: log lines scroll, the rule box stays at the bottom, redrawn in place."""

    def __init__(self, console: Any) -> None:
        from rich.live import Live

        self.console = console
        self.out: TextIO = console.file
        self._live = Live("", console=console, auto_refresh=False, transient=False, redirect_stdout=False)
        self._box = ""
        self._live.start()

    def line(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def rules(self, statuses: Sequence[Mapping[str, Any]]) -> None:
        from rich.text import Text

        box = render_rule_box(statuses) if statuses else ""
        if box != self._box:
            self._box = box
            self._live.update(Text(box), refresh=True)

    def pause(self) -> None:
        self._live.stop()

    def resume(self) -> None:
        self._live.start()

    def close(self) -> None:
        self._live.stop()


def make_view(out: TextIO | None = None, live: bool | None = None) -> PlainView | LiveView:
    """A :class:`LiveView` when ``out`` (default stdout) is a terminal, else a :class:`PlainView`."""
    out = out or sys.stdout
    if live is None:
        live = out.isatty()
    if live:
        from rich.console import Console

        return LiveView(Console(file=out, highlight=False))
    return PlainView(out)


def ask_to_stop(job_name: str, prompt: Callable[[str], str] = input) -> bool:
    """Ctrl-C while waiting: ask; Ctrl-C or end of input at the prompt leaves (KeyboardInterrupt)."""
    try:
        answer = prompt(f"Stop training job {job_name}? [y/N] ")
    except EOFError:
        raise KeyboardInterrupt from None
    return answer.strip().lower() in ("y", "yes")


def watch_job(
    sagemaker_client: Any,
    logs_client: Any,
    job_name: str,
    *,
    show_logs: bool = True,
    show_rules: bool = True,
    poll_s: float = 0.5,
    view: PlainView | LiveView | None = None,
    prompt: Callable[[str], str] = input,
) -> dict[str, Any]:
    """Follow ``job_name`` until it ends; return its last DescribeTrainingJob body."""
    view = view or make_view()
    tailer = LogTailer(logs_client, job_name) if show_logs else None
    printed: tuple[int, str] = (0, "")
    try:
        while True:
            try:
                description: dict[str, Any] = sagemaker_client.describe_training_job(TrainingJobName=job_name)
                lines, printed = _new_transitions(description, printed)
                lines += tailer.poll() if tailer else []
                # Log lines and status changes in the order they happened (a job can log ten steps
                # and be stopped by its rule between two polls).
                for _, text in sorted(lines, key=lambda item: item[0]):
                    view.line(text)
                if show_rules:
                    view.rules(rule_statuses(description))
                if description["TrainingJobStatus"] in TERMINAL:
                    description.pop("ResponseMetadata", None)
                    return description
                time.sleep(poll_s)
            except KeyboardInterrupt:
                view.pause()
                if ask_to_stop(job_name, prompt):
                    _stop(sagemaker_client, job_name, view)
                view.resume()
    finally:
        view.close()


def _epoch(value: Any) -> float:
    if isinstance(value, dt.datetime):
        return value.timestamp()
    return float(value) if isinstance(value, (int, float)) else 0.0


def _new_transitions(description: Mapping[str, Any], printed: tuple[int, str]) -> tuple[list[tuple[float, str]], tuple[int, str]]:
    """Transitions not printed yet (the last one again when only its message changed), timed."""
    transitions = description.get("SecondaryStatusTransitions") or []
    count, last_message = printed
    if not transitions:
        return [], printed
    if len(transitions) == count:
        fresh = transitions[-1:] if transitions[-1].get("StatusMessage", "") != last_message else []
    else:
        fresh = transitions[count:]
    lines = [(_epoch(t.get("StartTime")), transition_line(t)) for t in fresh]
    return lines, (len(transitions), transitions[-1].get("StatusMessage", ""))


def _stop(sagemaker_client: Any, job_name: str, view: PlainView | LiveView) -> None:
    from botocore.exceptions import ClientError

    try:
        sagemaker_client.stop_training_job(TrainingJobName=job_name)
        view.line(f"Stop requested for training job {job_name}.")
    except ClientError as e:  # it ended meanwhile
        view.line(f"Could not stop {job_name}: {e}")
