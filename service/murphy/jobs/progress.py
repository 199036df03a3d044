"""How a job's progress is told: stage walks, FailureReason texts, rule messages (pure functions
of the supervisor)."""

from __future__ import annotations

from murphy.jobs.model import JobRecord, RuleState, SecondaryStatus
from murphy.runtimes.base import ContainerState

S = SecondaryStatus
STAGES = {"Downloading": S.Downloading, "Training": S.Training, "Uploading": S.Uploading}
_ORDER = [S.Starting, S.Downloading, S.Training, S.Uploading]
MAX_REASON = 1024


def failure_reason(state: ContainerState, host: str | None = None) -> str:
    """The job's FailureReason from its failed container; ``host`` (a multi-instance job's
    ``algo-<i>``) is named at the end, as SageMaker does."""
    if host is not None:
        suffix = f" ({host})"
        return failure_reason(state)[:MAX_REASON - len(suffix)] + suffix
    if state.failure:
        return state.failure.strip()[:MAX_REASON]
    if state.phase == "missing":
        head = "InternalServerError: the training container vanished (its process is gone and left no exit status)"
    else:
        head = f"AlgorithmError: the training process exited with code {state.exit_code}"
    tail = state.log_tail.strip()
    text = f"{head}. Last lines of the log:\n{tail}" if tail else head
    return text if len(text) <= MAX_REASON else head + ". …" + text[-(MAX_REASON - len(head) - 3):]


def bare(message: str, rule: RuleState, result: dict[str, object]) -> str:
    """The rule's message without its own ``"<Rule>: "`` prefix (the status text names the rule)."""
    for prefix in (rule.name, str(result.get("rule_to_invoke") or ""), str(result.get("rule_name") or "")):
        if prefix and message.startswith(prefix + ": "):
            return message[len(prefix) + 2 :]
    return message


def advance(rec: JobRecord, target: SecondaryStatus, now: float) -> bool:
    """Walk forward through Starting → (Downloading) → Training → Uploading up to ``target``: a
    fast container may pass several stages between two looks, and each must be reported."""
    if rec.secondary not in _ORDER or _ORDER.index(target) <= _ORDER.index(rec.secondary):
        return False
    for stage in _ORDER[_ORDER.index(rec.secondary) + 1 : _ORDER.index(target) + 1]:
        if stage == S.Downloading and target != S.Downloading:
            continue
        rec.transition(stage, stage_message(stage), now)
    return True


def stage_message(stage: SecondaryStatus) -> str:
    return {
        S.Downloading: "Downloading input data and the training image",
        S.Training: "Training image download completed. Training in progress.",
        S.Uploading: "Uploading generated training model",
    }.get(stage, stage.value)
