"""The training-job record and its state machine.

A record is the *spec* (the CreateTrainingJob request, verbatim after validation) plus the
*observed status* (statuses, transitions, times, rule states), the *runtime handles* (so a
restarted service re-attaches) and a *version* for optimistic concurrency. Status enums carry the
AWS strings as values. The whole state machine is :data:`SECONDARY_TRANSITIONS` plus
:data:`PRIMARY_OF`: the primary ``TrainingJobStatus`` is always derived from the secondary one.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from murphy.exceptions import IllegalTransition
from murphy.runtimes.base import Handle


class TrainingJobStatus(str, Enum):
    InProgress = "InProgress"
    Completed = "Completed"
    Failed = "Failed"
    Stopping = "Stopping"
    Stopped = "Stopped"


class SecondaryStatus(str, Enum):
    Starting = "Starting"
    Downloading = "Downloading"
    Training = "Training"
    Uploading = "Uploading"
    Stopping = "Stopping"
    Stopped = "Stopped"
    MaxRuntimeExceeded = "MaxRuntimeExceeded"
    Completed = "Completed"
    Failed = "Failed"


class RuleEvaluationStatus(str, Enum):
    InProgress = "InProgress"
    NoIssuesFound = "NoIssuesFound"
    IssuesFound = "IssuesFound"
    Error = "Error"
    Stopping = "Stopping"
    Stopped = "Stopped"


S = SecondaryStatus
_RUNNING_EXITS = {S.Stopping, S.Failed, S.MaxRuntimeExceeded}

#: Allowed ``SecondaryStatus`` changes. Anything else raises :class:`IllegalTransition`.
SECONDARY_TRANSITIONS: dict[SecondaryStatus, frozenset[SecondaryStatus]] = {
    S.Starting: frozenset({S.Downloading, S.Training} | _RUNNING_EXITS),
    S.Downloading: frozenset({S.Training} | _RUNNING_EXITS),
    S.Training: frozenset({S.Uploading} | _RUNNING_EXITS),
    S.Uploading: frozenset({S.Completed} | _RUNNING_EXITS),
    S.Stopping: frozenset({S.Stopped, S.Failed, S.MaxRuntimeExceeded}),
    S.Stopped: frozenset(),
    S.MaxRuntimeExceeded: frozenset(),
    S.Completed: frozenset(),
    S.Failed: frozenset(),
}

#: ``TrainingJobStatus`` implied by each ``SecondaryStatus`` (SageMaker reports a job stopped for
#: exceeding its runtime as Stopped / MaxRuntimeExceeded).
PRIMARY_OF: dict[SecondaryStatus, TrainingJobStatus] = {
    S.Starting: TrainingJobStatus.InProgress,
    S.Downloading: TrainingJobStatus.InProgress,
    S.Training: TrainingJobStatus.InProgress,
    S.Uploading: TrainingJobStatus.InProgress,
    S.Stopping: TrainingJobStatus.Stopping,
    S.Stopped: TrainingJobStatus.Stopped,
    S.MaxRuntimeExceeded: TrainingJobStatus.Stopped,
    S.Completed: TrainingJobStatus.Completed,
    S.Failed: TrainingJobStatus.Failed,
}

TERMINAL_JOB = frozenset({TrainingJobStatus.Completed, TrainingJobStatus.Failed, TrainingJobStatus.Stopped})
TERMINAL_RULE = frozenset(
    {RuleEvaluationStatus.NoIssuesFound, RuleEvaluationStatus.IssuesFound, RuleEvaluationStatus.Error, RuleEvaluationStatus.Stopped}
)

RULE_TRANSITIONS: dict[RuleEvaluationStatus, frozenset[RuleEvaluationStatus]] = {
    RuleEvaluationStatus.InProgress: frozenset(TERMINAL_RULE | {RuleEvaluationStatus.Stopping}),
    RuleEvaluationStatus.Stopping: frozenset(TERMINAL_RULE),
    RuleEvaluationStatus.NoIssuesFound: frozenset(),
    RuleEvaluationStatus.IssuesFound: frozenset(),
    RuleEvaluationStatus.Error: frozenset(),
    RuleEvaluationStatus.Stopped: frozenset(),
}


def is_terminal(status: TrainingJobStatus) -> bool:
    return status in TERMINAL_JOB



@dataclass
class Transition:
    status: SecondaryStatus
    start_time: float
    end_time: float | None = None
    message: str = ""


@dataclass
class RuleState:
    """One entry of ``DebugRuleEvaluationStatuses`` (or the profiler's) plus its container."""

    name: str
    job_arn: str
    kind: str = "debug"  # "debug" | "profiler"
    status: RuleEvaluationStatus = RuleEvaluationStatus.InProgress
    details: str | None = None
    last_modified: float = 0.0
    handle: Handle | None = None
    result: dict[str, Any] | None = None  # the rule container's result.json, once read
    result_uri: str = ""

    def set_status(self, to: RuleEvaluationStatus, details: str | None, now: float) -> bool:
        """Move to ``to``; returns False when already there. Raises on an illegal change."""
        if to == self.status:
            if details is not None and details != self.details:
                self.details = details
                self.last_modified = now
                return True
            return False
        if to not in RULE_TRANSITIONS[self.status]:
            raise IllegalTransition(f"rule {self.name}: {self.status.value} -> {to.value} is not allowed")
        self.status = to
        if details is not None:
            self.details = details
        self.last_modified = now
        return True


@dataclass
class JobRecord:
    name: str
    arn: str
    account: str
    region: str
    spec: dict[str, Any]
    creation_time: float
    status: TrainingJobStatus = TrainingJobStatus.InProgress
    secondary: SecondaryStatus = SecondaryStatus.Starting
    transitions: list[Transition] = field(default_factory=list)
    last_modified_time: float = 0.0
    training_start_time: float | None = None
    training_end_time: float | None = None
    failure_reason: str | None = None
    #: Why the job is being stopped (user, rule finding, max runtime); set once.
    stop_reason: str | None = None
    #: When SIGTERM was sent to the training container (the grace period runs from here).
    stop_sent_at: float | None = None
    rules: list[RuleState] = field(default_factory=list)
    #: ``algo-1``'s training container; ``extra_training`` holds ``algo-2`` .. ``algo-N``'s
    #: (multi-instance jobs; launched together, so either all are recorded or none).
    training: Handle | None = None
    extra_training: list[Handle] = field(default_factory=list)
    tags: list[dict[str, str]] = field(default_factory=list)
    #: Free-form supervisor bookkeeping that must survive restarts (e.g. when training exited).
    notes: dict[str, Any] = field(default_factory=dict)
    version: int = 0

    @classmethod
    def new(cls, name: str, arn: str, account: str, region: str, spec: dict[str, Any], now: float | None = None,
            message: str = "Starting the training job") -> JobRecord:
        now = time.time() if now is None else now
        rec = cls(name=name, arn=arn, account=account, region=region, spec=spec, creation_time=now, last_modified_time=now)
        rec.transitions.append(Transition(SecondaryStatus.Starting, now, None, message))
        return rec

    def is_terminal(self) -> bool:
        return is_terminal(self.status)

    def training_handles(self) -> list[Handle]:
        """Every training host's handle, ``algo-1`` first (empty before the launch)."""
        return [self.training, *self.extra_training] if self.training is not None else []

    def transition(self, to: SecondaryStatus, message: str, now: float | None = None) -> bool:
        """Move the job to ``to`` (primary status follows); False if already there."""
        now = time.time() if now is None else now
        if to == self.secondary:
            return False
        if to not in SECONDARY_TRANSITIONS[self.secondary]:
            raise IllegalTransition(f"job {self.name}: {self.secondary.value} -> {to.value} is not allowed")
        if self.transitions and self.transitions[-1].end_time is None:
            self.transitions[-1].end_time = now
        terminal = not SECONDARY_TRANSITIONS[to]
        self.transitions.append(Transition(to, now, now if terminal else None, message))
        self.secondary = to
        self.status = PRIMARY_OF[to]
        self.last_modified_time = now
        if to == SecondaryStatus.Training and self.training_start_time is None:
            self.training_start_time = now
        if terminal:
            self.training_end_time = now
        return True

    # --- serialisation (the store keeps records as JSON) -----------------------------------

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        d["secondary"] = self.secondary.value
        for t in d["transitions"]:
            t["status"] = t["status"].value
        for r in d["rules"]:
            r["status"] = r["status"].value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobRecord:
        d = dict(d)
        d["status"] = TrainingJobStatus(d["status"])
        d["secondary"] = SecondaryStatus(d["secondary"])
        d["transitions"] = [Transition(**{**t, "status": SecondaryStatus(t["status"])}) for t in d.get("transitions", [])]
        d["rules"] = [
            RuleState(**{**r, "status": RuleEvaluationStatus(r["status"]), "handle": Handle(**r["handle"]) if r.get("handle") else None})
            for r in d.get("rules", [])
        ]
        d["training"] = Handle(**d["training"]) if d.get("training") else None
        # Records written before multi-instance jobs have no extra hosts.
        d["extra_training"] = [Handle(**h) for h in d.get("extra_training") or []]
        return cls(**d)
