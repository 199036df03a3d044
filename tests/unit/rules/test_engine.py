"""The rule engine (``evaluate_rule``) on real synthetic trials: outcomes, skip semantics, live
trials where steps appear while the rule runs, cancellation."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from murphy.exceptions import (
    NoMoreData,
    RuleEvaluationConditionMet,
    StepUnavailable,
    TensorUnavailableForStep,
)
from murphy.rules import Finding, Outcome, Rule, evaluate_rule
from murphy.rules.params import as_float

from .trialkit import TrialKit, write_trial


class BigValue(Rule):
    """Fires when max |w| > threshold; records the tensor and value."""

    def __init__(self, base_trial: Any, threshold: str = "10", tensor: str = "w") -> None:
        super().__init__(base_trial)
        self.threshold = as_float(threshold, "threshold", "BigValue")
        self.tensor = tensor
        self.seen: list[int] = []

    def invoke_at_step(self, step: int) -> bool:
        self.seen.append(step)
        v = float(np.max(np.abs(self.base_trial.tensor(self.tensor).value(step))))
        if v > self.threshold:
            return self.found(step, f"{self.tensor} reached {v:g} at step {step}", tensor=self.tensor, value=v)
        return False


class Raises(Rule):
    """Raises ``exc`` at the steps in ``at``; otherwise quiet."""

    def __init__(self, base_trial: Any, exc: BaseException, at: set[int]) -> None:
        super().__init__(base_trial)
        self.exc, self.at = exc, at

    def invoke_at_step(self, step: int) -> bool:
        if step in self.at:
            raise self.exc
        return False


def healthy(n: int, bad: dict[int, float] | None = None) -> dict[int, dict[str, Any]]:
    bad = bad or {}
    return {s: {"w": np.full((2, 2), bad.get(s, 1.0), np.float32)} for s in range(n)}


def test_finds_the_issue_at_the_right_step_with_the_finding() -> None:
    rule = BigValue(write_trial(healthy(10, {6: 100.0})))
    out = evaluate_rule(rule)
    assert out.status == "IssuesFound"
    assert (out.step, out.tensor, out.value) == (6, "w", 100.0)
    assert out.message == "w reached 100 at step 6"
    assert out.findings == (Finding(6, "w reached 100 at step 6", "w", 100.0),)
    assert out.steps_evaluated == 7 and out.last_step == 6
    assert rule.seen == list(range(7))  # stopped at the first finding


def test_no_issues_when_training_ends_healthy() -> None:
    rule = BigValue(write_trial(healthy(10)))
    out = evaluate_rule(rule)
    assert out == Outcome(
        "NoIssuesFound",
        message="BigValue: no issues found (10 steps evaluated, last step 9)",
        reason="training has ended",
        steps_evaluated=10,
        last_step=9,
    )


def test_rule_error_becomes_an_error_outcome_with_reason() -> None:
    rule = Raises(write_trial(healthy(6)), ZeroDivisionError("division by zero"), {3})
    out = evaluate_rule(rule)
    assert out.status == "Error"
    assert out.reason == "ZeroDivisionError: division by zero"
    assert out.message == "Raises: error at step 3"
    assert out.steps_evaluated == 3 and out.last_step == 2


@pytest.mark.parametrize(
    "exc",
    [TensorUnavailableForStep("w", 2), StepUnavailable(2, "GLOBAL")],
    ids=lambda e: type(e).__name__,
)
def test_unavailable_data_skips_the_step(exc: Exception) -> None:
    rule = Raises(write_trial(healthy(5)), exc, {2})
    out = evaluate_rule(rule)
    assert out.status == "NoIssuesFound"
    assert out.steps_evaluated == 4  # step 2 skipped, not counted


def test_tensor_missing_at_some_steps_is_skipped_and_found_later() -> None:
    data = healthy(6, {5: 50.0})
    data[1] = {"other": np.ones(2)}  # w not saved at step 1
    data[3] = {"other": np.ones(2)}
    rule = BigValue(write_trial(data))
    out = evaluate_rule(rule)
    assert (out.status, out.step, out.steps_evaluated) == ("IssuesFound", 5, 4)


def test_a_tensor_that_never_exists_means_no_issues_not_error() -> None:
    rule = BigValue(write_trial(healthy(3)), tensor="nope")
    out = evaluate_rule(rule)
    assert (out.status, out.steps_evaluated) == ("NoIssuesFound", 0)


def test_keep_going_collects_every_finding() -> None:
    rule = BigValue(write_trial(healthy(10, {3: 20.0, 7: -30.0})))
    out = evaluate_rule(rule, stop_at_first=False)
    assert out.status == "IssuesFound"
    assert out.step == 3 and out.value == 20.0
    assert [(f.step, f.value) for f in out.findings] == [(3, 20.0), (7, 30.0)]
    assert out.steps_evaluated == 10
    assert out.reason == "training has ended"


def test_only_saved_steps_are_visited() -> None:
    data = {0: {"w": np.ones(2)}, 1000: {"w": np.ones(2)}, 2_000_000: {"w": np.full(2, 99.0)}}
    rule = BigValue(write_trial(data))
    t0 = time.monotonic()
    out = evaluate_rule(rule)
    assert time.monotonic() - t0 < 2.0
    assert rule.seen == [0, 1000, 2_000_000]
    assert out.step == 2_000_000


def test_start_and_end_step_bound_the_evaluation() -> None:
    rule = BigValue(write_trial(healthy(10, {2: 50.0, 8: 50.0})))
    out = evaluate_rule(rule, start_step=3, end_step=8)
    assert out.status == "NoIssuesFound"
    assert rule.seen == [3, 4, 5, 6, 7]
    assert out.reason == "reached end_step 8"


def test_end_step_on_a_live_trial_returns_once_passed() -> None:
    kit = TrialKit().steps(healthy(6))  # no end marker
    rule = BigValue(kit.trial())
    out = evaluate_rule(rule, end_step=3)
    assert (out.status, out.last_step) == ("NoIssuesFound", 2)


def test_rule_raising_condition_met_itself_counts_as_a_finding() -> None:
    rule = Raises(write_trial(healthy(5)), RuleEvaluationConditionMet("Raises", 2), {2})
    out = evaluate_rule(rule)
    assert (out.status, out.step, out.message) == ("IssuesFound", 2, "Raises: condition met at step 2")


def test_no_more_data_from_the_rule_ends_without_issues() -> None:
    rule = Raises(write_trial(healthy(5)), NoMoreData(9, "GLOBAL", 4), {1})
    out = evaluate_rule(rule)
    assert out.status == "NoIssuesFound"
    assert out.reason is not None and out.reason.startswith("the rule reached the end of the data at step 1")


def test_rule_without_found_gets_a_default_message() -> None:
    class Always(Rule):
        def invoke_at_step(self, step: int) -> bool:
            return step == 1

    out = evaluate_rule(Always(write_trial(healthy(3))))
    assert (out.step, out.message, out.tensor, out.value) == (1, "Always: condition met at step 1", None, None)


def test_smdebug_style_rule_without_evaluate_is_driven_through_invoke() -> None:
    class RuleEvaluationConditionMet(Exception):  # stands in for smdebug's class
        pass

    class Legacy:
        def __init__(self, trial: Any) -> None:
            self.base_trial = trial
            self.rule_name = "Legacy"

        def invoke(self, step: int) -> None:
            if step == 2:
                raise RuleEvaluationConditionMet()

    out = evaluate_rule(Legacy(write_trial(healthy(4))))
    assert (out.status, out.step, out.message) == ("IssuesFound", 2, "Legacy: condition met at step 2")


def test_progress_is_reported_per_step() -> None:
    calls: list[tuple[int | None, int]] = []
    evaluate_rule(BigValue(write_trial(healthy(3))), progress=lambda s, n: calls.append((s, n)))
    assert calls[:3] == [(0, 1), (1, 2), (2, 3)]


# ---- live trials ---------------------------------------------------------------------------


def _writer(kit: TrialKit, n: int, bad_at: int | None, period: float, written: dict[int, float], end: bool) -> threading.Thread:
    def write() -> None:
        for s in range(n):
            time.sleep(period)
            kit.step(s, {"w": np.full(2, 1e6 if s == bad_at else 1.0, np.float32)})
            written[s] = time.monotonic()
        if end:
            kit.end()

    return threading.Thread(target=write, daemon=True)


def test_live_trial_finds_the_bad_step_within_a_second_of_it_being_written(tmp_path: Path) -> None:
    kit = TrialKit(tmp_path / "job")
    kit.step(0, {"w": np.ones(2, np.float32)})
    written: dict[int, float] = {}
    writer = _writer(kit, 40, bad_at=25, period=0.02, written=written, end=True)
    rule = BigValue(kit.trial(poll_interval=0.05))
    writer.start()
    out = evaluate_rule(rule, poll_interval=0.05)
    found_at = time.monotonic()
    writer.join()
    assert (out.status, out.step) == ("IssuesFound", 25)
    assert found_at - written[25] < 1.0


def test_live_trial_ends_when_training_ends(tmp_path: Path) -> None:
    kit = TrialKit(tmp_path / "job")
    written: dict[int, float] = {}
    writer = _writer(kit, 8, bad_at=None, period=0.02, written=written, end=True)
    writer.start()
    rule = BigValue(kit.trial(poll_interval=0.02))
    out = evaluate_rule(rule, poll_interval=0.02)
    writer.join()
    assert (out.status, out.steps_evaluated, out.last_step) == ("NoIssuesFound", 8, 7)


def test_should_stop_cancels_a_waiting_evaluation() -> None:
    kit = TrialKit().steps(healthy(3))  # never ends
    deadline = time.monotonic() + 0.3
    t0 = time.monotonic()
    out = evaluate_rule(BigValue(kit.trial()), poll_interval=0.02, should_stop=lambda: time.monotonic() > deadline)
    assert out.status == "Stopped"
    assert out.reason == "stopped by request"
    assert 0.3 <= time.monotonic() - t0 < 1.5
    assert out.steps_evaluated == 3


def test_idle_timeout_ends_a_dead_run() -> None:
    kit = TrialKit().steps(healthy(3))
    out = evaluate_rule(BigValue(kit.trial()), poll_interval=0.02, idle_timeout=0.2)
    assert out.status == "NoIssuesFound"
    assert out.reason == "no new step and no end-of-training marker for 0.2 s"


def test_a_broken_trial_is_an_error_not_a_crash() -> None:
    class BrokenTrial:
        loaded_all_steps = False

        def steps(self) -> list[int]:
            raise OSError("store unreachable")

    class Quiet(Rule):
        def invoke_at_step(self, step: int) -> bool:
            return False

    out = evaluate_rule(Quiet(BrokenTrial()))
    assert (out.status, out.reason) == ("Error", "OSError: store unreachable")
