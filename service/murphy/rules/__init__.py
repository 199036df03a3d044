"""Rules: the ``Rule`` base class, the evaluation engine, the built-in rules and the
``rule-eval`` entrypoint one rule container runs."""

from __future__ import annotations

from murphy.rules.engine import Outcome, evaluate_rule
from murphy.rules.invoker import invoke_rule
from murphy.rules.rule import Finding, Rule

__all__ = ["Finding", "Outcome", "Rule", "evaluate_rule", "invoke_rule"]
