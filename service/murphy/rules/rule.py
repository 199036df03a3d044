"""The ``Rule`` base class, compatible with smdebug's ``smdebug.rules.rule.Rule``.

A rule declares what it needs (``set_required_tensors``), then answers one question per global
step (``invoke_at_step(step) -> bool``). smdebug signals a finding by raising
``RuleEvaluationConditionMet`` from :meth:`Rule.invoke`; murphy's engine
(:mod:`murphy.rules.engine`) calls :meth:`Rule.evaluate` instead, which returns a verdict, and
keeps :meth:`invoke` for custom rules and notebooks written for smdebug.

Beyond smdebug, a rule that fires should record *what* fired with :meth:`Rule.found` (tensor,
value, message); the engine puts that into the result so nobody has to dig through the trial by
hand to find the first bad tensor.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from murphy.exceptions import RuleEvaluationConditionMet
from murphy.rules.req_tensors import RequiredTensors
from murphy.trial import no_refresh


@dataclass(frozen=True)
class Finding:
    """What a rule saw when its condition held."""

    step: int
    message: str
    tensor: str | None = None
    value: float | None = None


class Rule(ABC):
    """Base class of every rule (built-in or custom).

    ``Rule(base_trial, action_str="", other_trials=None)`` is smdebug 1.0.34's signature; the
    older ``Rule(base_trial, other_trials)`` form (a list as the second positional argument) is
    accepted too, as are ``**params`` that a subclass does not consume.
    """

    def __init__(
        self,
        base_trial: Any,
        action_str: str | Sequence[Any] | None = "",
        other_trials: Sequence[Any] | None = None,
        **params: Any,
    ) -> None:
        if isinstance(action_str, list | tuple):
            # smdebug < 1.0: Rule(base_trial, other_trials)
            other_trials, action_str = action_str, ""
        self.base_trial = base_trial
        self.other_trials: list[Any] = list(other_trials or [])
        self.trials: list[Any] = [base_trial, *self.other_trials]
        self.action_str = action_str or ""
        self.params = params
        self.req_tensors = RequiredTensors(base_trial, self.other_trials)
        self.rule_name = type(self).__name__
        self.logger = logging.getLogger(f"murphy.rules.{self.rule_name}")
        self.report: dict[str, Any] = {
            "RuleTriggered": 0,
            "Violations": 0,
            "Details": {},
            "Datapoints": 0,
            "RuleParameters": "",
        }
        self.finding: Finding | None = None

    # ---- what subclasses implement ---------------------------------------------------------

    def set_required_tensors(self, step: int) -> None:  # noqa: B027 - optional hook, not abstract
        """Declare (``self.req_tensors.add(...)``) the tensors needed at ``step``. Optional."""

    @abstractmethod
    def invoke_at_step(self, step: int) -> bool:
        """True when the rule's condition holds at global ``step``."""

    # ---- helpers for subclasses ------------------------------------------------------------

    def found(self, step: int, message: str, tensor: str | None = None, value: float | None = None) -> bool:
        """Record what fired (for the result file and events) and return True."""
        self.finding = Finding(step, message, tensor, value)
        return True

    # ---- evaluation ------------------------------------------------------------------------

    def evaluate(self, step: int) -> bool:
        """One step, without waiting and without exceptions for a finding (murphy's engine).

        The caller has made sure the step is available. Trial lookup errors
        (``TensorUnavailableForStep`` ...) propagate; the engine treats them as smdebug does.
        """
        self.finding = None
        with no_refresh(self.trials):
            self.req_tensors.clear()
            self.set_required_tensors(step)
            self.req_tensors.fetch()
            fired = bool(self.invoke_at_step(step))
        if fired and self.finding is None:
            self.finding = Finding(step, f"{self.rule_name}: condition met at step {step}")
        return fired

    def invoke(self, step: int) -> None:
        """smdebug's contract: wait for ``step``, evaluate, raise ``RuleEvaluationConditionMet``."""
        self.base_trial.wait_for_steps([step])
        if self.evaluate(step):
            raise RuleEvaluationConditionMet(self.rule_name, step)
