"""From SageMaker's ``RuleParameters`` string map to a constructed rule.

The runner's own keys are split off (:func:`split_parameters`); the rest are the rule's
parameters, checked against the rule class's ``__init__`` signature before construction
(:func:`check_parameters`) so a typo gives "unknown parameter 'treshold' for X (accepted: ...)"
instead of a TypeError, or worse, silence.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from murphy.rules.params import RuleParameterError, as_optional_int

# Keys the SageMaker SDK / service put into RuleParameters for the container, not for the rule.
RUNNER_KEYS = frozenset(
    {"rule_to_invoke", "source_s3_uri", "action_json", "start_step", "end_step", "base_trial"}
)
_OTHER_TRIAL = re.compile(r"^other_trial_(\d+)$")
# Constructor arguments the runner fills itself; never taken from RuleParameters.
_RESERVED_ARGS = frozenset({"base_trial", "other_trials", "action_str"})


@dataclass
class RuleSpec:
    """RuleParameters, split into the runner's keys and the rule's own parameters."""

    rule_to_invoke: str
    params: dict[str, Any] = field(default_factory=dict)
    other_trials: list[str] = field(default_factory=list)
    source_uri: str | None = None
    action_json: str | None = None
    start_step: int | None = None
    end_step: int | None = None
    base_trial: str | None = None


def split_parameters(rule_parameters: Mapping[str, Any]) -> RuleSpec:
    """Split RuleParameters; raises :class:`RuleParameterError` for a missing ``rule_to_invoke``
    or a non-integer ``start_step`` / ``end_step``."""
    rp = dict(rule_parameters)
    name = rp.get("rule_to_invoke")
    if not isinstance(name, str) or not name.strip():
        raise RuleParameterError(
            "RuleParameters has no rule_to_invoke (the rule to run, e.g. \"ExplodingTensor\", "
            "or the class name in source_s3_uri)"
        )
    others = sorted(
        ((int(m.group(1)), str(v)) for k, v in rp.items() if (m := _OTHER_TRIAL.match(k))),
        key=lambda kv: kv[0],
    )
    spec = RuleSpec(
        rule_to_invoke=name.strip(),
        params={k: v for k, v in rp.items() if k not in RUNNER_KEYS and not _OTHER_TRIAL.match(k)},
        other_trials=[uri for _, uri in others],
        source_uri=_optional_str(rp.get("source_s3_uri")),
        action_json=_optional_str(rp.get("action_json")),
        start_step=as_optional_int(rp.get("start_step"), "start_step", "RuleParameters"),
        end_step=as_optional_int(rp.get("end_step"), "end_step", "RuleParameters"),
        base_trial=_optional_str(rp.get("base_trial")),
    )
    return spec


def _optional_str(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _signature(cls: type[Any]) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):  # no introspectable signature: let construction decide
        return [inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)]


def accepts_other_trials(cls: type[Any]) -> bool:
    params = _signature(cls)
    return any(p.kind is p.VAR_KEYWORD or p.name == "other_trials" for p in params)


def check_parameters(cls: type[Any], rule_name: str, params: Mapping[str, Any], *, other_trials: int = 0) -> None:
    """Reject unknown and missing parameters of ``cls(base_trial, **params)`` with clear
    messages. A class that takes ``**kwargs`` accepts any name (it checks them itself)."""
    sig = _signature(cls)
    named = [p for p in sig[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    accepted = sorted(p.name for p in named if p.name not in _RESERVED_ARGS)
    if not any(p.kind is p.VAR_KEYWORD for p in sig):
        for key in sorted(params):
            if key not in accepted:
                hint = difflib.get_close_matches(key, accepted, n=1)
                did_you_mean = f"; did you mean {hint[0]!r}?" if hint else ""
                raise RuleParameterError(
                    f"unknown parameter {key!r} for {rule_name} "
                    f"(accepted: {', '.join(accepted) or 'none'}){did_you_mean}"
                )
    for p in named:
        if p.default is not p.empty or p.name in params:
            continue
        if p.name == "other_trials" and other_trials:
            continue
        if p.name == "action_str":  # smdebug 1.0.34's Rule requires it; the runner passes ""
            continue
        raise RuleParameterError(f"missing required parameter {p.name!r} for {rule_name}")
    if other_trials and not accepts_other_trials(cls):
        raise RuleParameterError(
            f"{rule_name} does not take other trials, but RuleParameters has "
            f"{other_trials} other_trial_<i> key(s)"
        )


def construct(cls: type[Any], rule_name: str, base_trial: Any, params: Mapping[str, Any], other_trials: list[Any]) -> Any:
    """``cls(base_trial, **params[, other_trials=...])``; a failure becomes a
    :class:`RuleParameterError` that names the rule."""
    kwargs = dict(params)
    if other_trials:
        kwargs["other_trials"] = other_trials
    if "action_str" in {p.name for p in _signature(cls)[1:] if p.default is p.empty}:
        kwargs["action_str"] = ""
    try:
        return cls(base_trial, **kwargs)
    except RuleParameterError:
        raise
    except Exception as e:
        raise RuleParameterError(
            f"{rule_name} could not be constructed with RuleParameters {dict(params)!r}: "
            f"{type(e).__name__}: {e}"
        ) from e
