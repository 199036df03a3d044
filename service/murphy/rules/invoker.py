"""``invoke_rule``: smdebug's rule loop, with smdebug's exact (exception-driven) semantics.

Kept for notebooks and custom scripts written for ``smdebug.rules.invoke_rule``. The rule
container uses :func:`murphy.rules.engine.evaluate_rule`, which returns an outcome instead.
"""

from __future__ import annotations

import logging
from typing import Any

from murphy.exceptions import (
    NoMoreProfilerData,
    RuleEvaluationConditionMet,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)

log = logging.getLogger(__name__)


def invoke_rule(
    rule_obj: Any,
    start_step: int | None = 0,
    end_step: int | None = None,
    raise_eval_cond: bool = False,
) -> None:
    """Call ``rule_obj.invoke(s)`` for every integer step ``s`` from ``start_step`` up to the
    exclusive ``end_step`` (forever when None), as smdebug 1.0.34 does.

    ``TensorUnavailableForStep``, ``StepUnavailable`` and ``TensorUnavailable`` are logged and
    the step skipped. ``RuleEvaluationConditionMet`` is re-raised when ``raise_eval_cond``;
    otherwise it is logged and the loop goes on, unless its ``end_of_rule`` is set.
    ``NoMoreProfilerData`` ends the loop. ``NoMoreData`` is not caught: with ``end_step=None``
    the call therefore ends by raising ``NoMoreData`` once training has ended.
    """
    name = type(rule_obj).__name__
    step = 0 if start_step is None else start_step
    log.info("Started execution of rule %s at step %d", name, step)
    while end_step is None or step < end_step:
        try:
            rule_obj.invoke(step)
        except (TensorUnavailableForStep, StepUnavailable, TensorUnavailable) as e:
            log.debug("%s", e)
        except RuleEvaluationConditionMet as e:
            if raise_eval_cond:
                raise
            log.debug("%s", e)
            if e.end_of_rule:
                break
        except NoMoreProfilerData as e:
            log.info("No more profiler data for rule %s at timestamp %d", name, e.timestamp)
            break
        step += 1
    log.info("Ended execution of rule %s at end_step %d", name, step - 1)
