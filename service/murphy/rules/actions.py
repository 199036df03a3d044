"""Rule actions (``RuleParameters["action_json"]``): parsed, validated, and recorded in the
result for the control plane to carry out. The rule runner itself never calls AWS or sends mail.

Accepted (as serialised by the SageMaker SDK; keys and names are matched case-insensitively,
like smdebug, which lower-cases the whole string):

- ``{"name": "stoptraining", "training_job_prefix": P}``: stop the training job. murphy stops
  exactly the job named by ``--training-job-name``; the prefix is recorded but never used to pick
  a job, because smdebug's prefix match (``list_training_jobs(NameContains=P)``) can stop another
  team's job whose name merely contains ``P``, or nothing when two jobs match.
- ``{"name": "email", "endpoint": "someone@example.com"}``
- ``{"name": "sms", "endpoint": "+15555550100"}``

Unlike smdebug, endpoint values keep their case (lower-casing them helps no one).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from murphy.rules.params import RuleParameterError

_KEYS: dict[str, set[str]] = {
    "stoptraining": {"training_job_prefix"},
    "email": {"endpoint"},
    "sms": {"endpoint"},
}
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_PHONE = re.compile(r"^\+?[0-9][0-9 ()\-]{5,}$")


class ActionError(RuleParameterError):
    """``action_json`` is not valid."""


@dataclass(frozen=True)
class Action:
    """One action for the control plane: ``stoptraining`` (of ``training_job_name``), ``email``
    or ``sms`` (to ``endpoint``)."""

    name: str
    training_job_name: str | None = None
    training_job_prefix: str | None = None
    endpoint: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.name == "stoptraining":
            d["training_job_name"] = self.training_job_name
            d["training_job_prefix"] = self.training_job_prefix
        else:
            d["endpoint"] = self.endpoint
        return d


def parse_actions(action_json: str | None, training_job_name: str | None) -> list[Action]:
    """Parse ``action_json`` (a JSON object or list of objects); ``[]`` when empty.

    Raises :class:`ActionError` with a message naming what is wrong: bad JSON, an unknown action
    name, an unknown or missing key, a malformed endpoint, or ``stoptraining`` without a training
    job name to stop.
    """
    if action_json is None or not action_json.strip():
        return []
    try:
        doc = json.loads(action_json)
    except ValueError as e:
        # The SageMaker SDK (smdebug-rulesconfig) sends the list with its quotes backslash-escaped
        # inside the string value: ``[{\"name\": \"stoptraining\", ...}]``.
        try:
            doc = json.loads(action_json.replace('\\"', '"'))
        except ValueError:
            raise ActionError(f"action_json is not valid JSON: {e}") from None
    items = doc if isinstance(doc, list) else [doc]
    return [_one(i, item, training_job_name) for i, item in enumerate(items)]


def _one(i: int, item: Any, training_job_name: str | None) -> Action:
    where = f"action_json[{i}]"
    if not isinstance(item, dict):
        raise ActionError(f"{where} must be an object like {{\"name\": \"stoptraining\"}}, got {item!r}")
    fields = {str(k).strip().lower(): v for k, v in item.items()}
    name = str(fields.pop("name", "")).strip().lower()
    if name not in _KEYS:
        raise ActionError(f"{where}: unknown action name {name!r} (known: email, sms, stoptraining)")
    unknown = sorted(set(fields) - _KEYS[name])
    if unknown:
        raise ActionError(
            f"{where}: unknown key(s) {', '.join(unknown)} for action {name} "
            f"(accepted: name, {', '.join(sorted(_KEYS[name]))})"
        )
    if name == "stoptraining":
        if not training_job_name:
            raise ActionError(
                f"{where}: action stoptraining needs the exact training job name to stop "
                "(--training-job-name or MURPHY_TRAINING_JOB_NAME); murphy never stops jobs by prefix"
            )
        prefix = fields.get("training_job_prefix")
        return Action(name, training_job_name=training_job_name, training_job_prefix=None if prefix is None else str(prefix))
    endpoint = fields.get("endpoint")
    pattern = _EMAIL if name == "email" else _PHONE
    if not isinstance(endpoint, str) or not pattern.match(endpoint.strip()):
        expected = "an email address" if name == "email" else "a phone number like +15555550100"
        raise ActionError(f"{where}: action {name} needs endpoint = {expected}, got {endpoint!r}")
    return Action(name, endpoint=endpoint.strip())
