"""Which events a job record change produces (the store's event builder, set by the plane).

One "SageMaker Training Job State Change" event per write in which ``TrainingJobStatus``,
``SecondaryStatus`` or any rule's ``RuleEvaluationStatus`` changed; nothing for writes that only
touch tags, handles or bookkeeping. ``detail`` is the DescribeTrainingJob body of the new record
(with ``Tags`` as a ``{key: value}`` map, as in AWS's sample) plus ``MurphyChanges``: what changed
in this write, so a subscriber need not diff. A rule finding's entry names the rule, the step
and the tensor.
"""

from __future__ import annotations

import time
from typing import Any

from murphy.events.envelope import envelope
from murphy.jobs.describe import describe
from murphy.jobs.model import JobRecord, RuleEvaluationStatus, RuleState


def changes(old: JobRecord | None, new: JobRecord) -> list[dict[str, Any]]:
    """``MurphyChanges`` of the write ``old`` → ``new`` (``old`` None: the job was created)."""
    out: list[dict[str, Any]] = []
    before = None if old is None else old.status.value
    if before != new.status.value:
        out.append({"Kind": "TrainingJobStatus", "From": before, "To": new.status.value})
    out.extend(_secondary(old, new))
    rules_before = {} if old is None else {r.name: r.status.value for r in old.rules}
    for rule in new.rules:
        was = rules_before.get(rule.name)
        if was != rule.status.value:
            out.append(_rule_change(rule, was))
    return out


def _secondary(old: JobRecord | None, new: JobRecord) -> list[dict[str, Any]]:
    """One entry per step: a write may pass several stages (Starting → Training → Uploading)."""
    if old is None:
        return [{"Kind": "SecondaryStatus", "From": None, "To": new.secondary.value}]
    if old.secondary == new.secondary:
        return []
    seen = len(old.transitions)
    steps = [t.status.value for t in new.transitions[seen:]]
    if not steps or steps[-1] != new.secondary.value:
        steps = [new.secondary.value]  # transitions rewritten: report the net change
    out, prev = [], old.secondary.value
    for to in steps:
        out.append({"Kind": "SecondaryStatus", "From": prev, "To": to})
        prev = to
    return out


def _rule_change(rule: RuleState, was: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"Kind": "RuleEvaluationStatus", "From": was, "To": rule.status.value,
                             "RuleConfigurationName": rule.name}
    result = rule.result or {}
    if rule.status == RuleEvaluationStatus.IssuesFound:
        step = result.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            entry["Step"] = step
        tensor = result.get("tensor")
        if isinstance(tensor, str) and tensor:
            entry["Tensor"] = tensor
    return entry


def events_for(old: JobRecord | None, new: JobRecord) -> list[dict[str, Any]]:
    """The envelopes to append to the outbox with this write: none or one."""
    what = changes(old, new)
    if not what:
        return []
    detail = describe(new)
    detail["Tags"] = {t["Key"]: t.get("Value", "") for t in new.tags}
    detail["MurphyChanges"] = what
    return [envelope(detail, account=new.account, region=new.region, resources=[new.arn],
                     time=time.time())]
