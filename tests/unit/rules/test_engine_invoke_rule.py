"""``invoke_rule``: smdebug 1.0.34's exception-driven loop, step for step."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from murphy.exceptions import NoMoreData, NoMoreProfilerData, RuleEvaluationConditionMet
from murphy.rules import Rule, invoke_rule

from .trialkit import TrialKit, write_trial


class FiresAt(Rule):
    def __init__(self, base_trial: Any, at: set[int]) -> None:
        super().__init__(base_trial)
        self.at = at
        self.seen: list[int] = []

    def invoke_at_step(self, step: int) -> bool:
        self.seen.append(step)
        self.base_trial.tensor("w").value(step)  # TensorUnavailableForStep where w is missing
        return step in self.at


def _trial(steps: list[int], without_w: tuple[int, ...] = ()) -> Any:
    return write_trial({s: {"x" if s in without_w else "w": np.ones(2)} for s in steps})


def test_raise_eval_cond_reraises_the_first_finding() -> None:
    rule = FiresAt(_trial(list(range(6))), {2, 4})
    with pytest.raises(RuleEvaluationConditionMet) as info:
        invoke_rule(rule, raise_eval_cond=True)
    assert info.value.step == 2 and info.value.rule_name == "FiresAt"
    assert rule.seen == [0, 1, 2]


def test_without_raise_it_keeps_going_and_ends_by_raising_no_more_data() -> None:
    # steps 1 and 3 were never saved (StepUnavailable), w is missing at 4 (skipped too)
    rule = FiresAt(_trial([0, 2, 4, 5], without_w=(4,)), {2})
    with pytest.raises(NoMoreData) as info:
        invoke_rule(rule)
    assert info.value.step == 6 and info.value.last_step == 5
    assert rule.seen == [0, 2, 4, 5]


def test_end_step_returns_normally_and_is_exclusive() -> None:
    rule = FiresAt(_trial(list(range(10))), set())
    invoke_rule(rule, start_step=3, end_step=6)
    assert rule.seen == [3, 4, 5]


def test_end_of_rule_breaks_the_loop() -> None:
    class Once(Rule):
        def invoke_at_step(self, step: int) -> bool:
            return False

        def invoke(self, step: int) -> None:
            self.last = step
            if step == 1:
                raise RuleEvaluationConditionMet("Once", step, end_of_rule=True)

    rule = Once(_trial([0, 1, 2, 3]))
    invoke_rule(rule)
    assert rule.last == 1


def test_no_more_profiler_data_breaks_the_loop() -> None:
    class Profiler(Rule):
        def invoke_at_step(self, step: int) -> bool:
            if step == 2:
                raise NoMoreProfilerData(123)
            return False

    rule = Profiler(_trial([0, 1, 2, 3]))
    invoke_rule(rule)  # returns, no exception


def test_other_errors_propagate() -> None:
    class Bad(Rule):
        def invoke_at_step(self, step: int) -> bool:
            raise KeyError("boom")

    with pytest.raises(KeyError):
        invoke_rule(Bad(TrialKit().steps({0: {"w": np.ones(1)}}).end().trial()))
