"""A first guess at why a job's tensors blew up: a heuristic, not a proof.

Inputs are what any client can see: the DescribeTrainingJob body (hyperparameters, the rules'
``StatusDetails``) and, optionally, the saved tensors (a trial). Rules of thumb:

* a learning rate (``lr``, ``learning_rate``, ``eta``, ``step_size``) of 1 or more: common
  optimizers are used with 1e-4..1e-1; steps this large overshoot and diverge;
* an input scale (a hyperparameter named ``*scale*``) of 1e6 or more: with a squared-error loss
  the gradient grows with the square of the inputs;
* the first saved gradient or loss already beyond 1e15: the values were huge from the first
  step, so the setup (data, hyperparameters), not a slow drift, is the likely cause; beyond
  ~1.8e19 their square overflows float32 (max 3.4e38), which Adam's second moment computes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

LR_NAMES = re.compile(r"^(lr|learning[_-]?rate|eta|step[_-]?size)$", re.IGNORECASE)
SCALE_NAMES = re.compile(r"scale", re.IGNORECASE)
LR_LIMIT = 1.0
SCALE_LIMIT = 1e6
HUGE = 1e15
FLOAT32_SQUARE_OVERFLOW = math.sqrt(float(np.finfo(np.float32).max))  # ~1.8e19
_TENSOR = re.compile(r"\btensor (\S+)")
_STEP = re.compile(r"\bat step (\d+)\b")


@dataclass(frozen=True)
class Finding:
    rule: str
    tensor: str | None
    step: int | None
    details: str


@dataclass(frozen=True)
class Suspect:
    hyperparameter: str
    value: float
    reason: str


@dataclass(frozen=True)
class FirstValue:
    tensor: str
    collection: str
    step: int
    max_abs: float


@dataclass
class Diagnosis:
    findings: list[Finding] = field(default_factory=list)
    suspects: list[Suspect] = field(default_factory=list)
    first_values: list[FirstValue] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = ["murphy's diagnosis (a heuristic: rules of thumb over the job's hyperparameters and first "
               "saved values, not a proof):"]
        for f in self.findings:
            what = f"tensor {f.tensor}" if f.tensor else "a tensor"
            where = f" at step {f.step}" if f.step is not None else ""
            out.append(f"  - {f.rule}: {what} first went non-finite{where}")
        for v in self.first_values:
            note = f"  - first saved {v.tensor} (step {v.step}) is already ~{v.max_abs:.1e}"
            if v.collection == "gradients" and v.max_abs >= FLOAT32_SQUARE_OVERFLOW:
                note += ": its square overflows float32, which an Adam-style second moment computes"
            out.append(note)
        if self.suspects:
            out.append("  hyperparameters that look responsible:")
            out += [f"  - {s.hyperparameter}={s.value:g}: {s.reason}" for s in self.suspects]
        elif self.findings:
            out.append("  no hyperparameter looks out of range by these rules of thumb; look at the data and the model")
        if not self.findings and not self.suspects and not self.first_values:
            out.append("  nothing suspicious: no rule fired and no hyperparameter looks out of range")
        return out


def _number(raw: Any) -> float | None:
    """A hyperparameter value as a float (script-mode values are JSON-encoded strings)."""
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def suspects(hyperparameters: Mapping[str, Any]) -> list[Suspect]:
    out = []
    for name, raw in hyperparameters.items():
        value = _number(raw)
        if value is None or name.startswith("sagemaker_"):
            continue
        if LR_NAMES.match(name) and value >= LR_LIMIT:
            out.append(Suspect(name, value, f"a learning rate >= {LR_LIMIT:g}; optimizers are usually run with "
                                            "1e-4..1e-1, and steps this large overshoot and diverge"))
        elif SCALE_NAMES.search(name) and abs(value) >= SCALE_LIMIT:
            out.append(Suspect(name, value, f"inputs scaled by >= {SCALE_LIMIT:g}; with a squared-error loss the "
                                            "gradient grows with the square of the inputs"))
    return out


def findings(description: Mapping[str, Any]) -> list[Finding]:
    out = []
    for rule in list(description.get("DebugRuleEvaluationStatuses", [])):
        if rule.get("RuleEvaluationStatus") != "IssuesFound":
            continue
        details = str(rule.get("StatusDetails") or "")
        tensor, step = _TENSOR.search(details), _STEP.search(details)
        out.append(Finding(rule["RuleConfigurationName"], tensor.group(1) if tensor else None,
                           int(step.group(1)) if step else None, details))
    return out


def first_values(trial: Any, collections: tuple[str, ...] = ("gradients", "losses")) -> list[FirstValue]:
    """The largest finite magnitude of each gradient/loss tensor at its first saved step, if huge."""
    out = []
    names: dict[str, str] = {}
    for coll in collections:
        try:
            for n in trial.tensor_names(collection=coll):
                names.setdefault(n, coll)
        except (KeyError, ValueError):
            continue
    for name, coll in names.items():
        tensor = trial.tensor(name)
        steps = tensor.steps()
        if not steps:
            continue
        values = np.asarray(tensor.value(steps[0]), dtype=np.float64).ravel()
        finite = values[np.isfinite(values)]
        if finite.size and float(np.max(np.abs(finite))) >= HUGE:
            out.append(FirstValue(name, coll, int(steps[0]), float(np.max(np.abs(finite)))))
    return out


def diagnose(description: Mapping[str, Any], trial: Any = None) -> Diagnosis:
    """Findings of the job's rules, suspicious hyperparameters and (with a trial) huge first values."""
    return Diagnosis(
        findings=findings(description),
        suspects=suspects(description.get("HyperParameters") or {}),
        first_values=first_values(trial) if trial is not None else [],
    )
