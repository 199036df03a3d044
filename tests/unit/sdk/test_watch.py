"""The rule box, status lines and end-of-job summary in plain (non-terminal) mode."""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

import pytest

from murphy.sdk.job import UnexpectedStatusException, check_job_status
from murphy.sdk.watch import (
    PlainView,
    _new_transitions,
    ask_to_stop,
    fired_step,
    make_view,
    render_rule_box,
    summary_lines,
)

DETAILS = ("RuleEvaluationConditionMet: Evaluation of the rule ExplodingTensor at step 2 resulted in the condition "
           "being met. ExplodingTensor: tensor LinearRegression_weight has 2 of 2 non-finite (NaN/inf) values at step 2")


def rule(status: str, name: str = "ExplodingTensor", details: str | None = None) -> dict[str, Any]:
    r = {"RuleConfigurationName": name, "RuleEvaluationStatus": status}
    if details:
        r["StatusDetails"] = details
    return r


def test_the_box_is_the_articles() -> None:
    assert render_rule_box([rule("InProgress")]).split("\n") == [
        "********* Debugger Rule Status *********",
        "*",
        "*    ExplodingTensor: InProgress        ",
        "*",
        "****************************************",
    ]
    two = render_rule_box([rule("IssuesFound"), rule("NoIssuesFound", "LossNotDecreasing")]).split("\n")
    assert two[2:4] == ["*    ExplodingTensor: IssuesFound       ", "*  LossNotDecreasing: NoIssuesFound     "]


def test_plain_view_prints_the_box_only_when_a_status_changes() -> None:
    out = io.StringIO()
    view = PlainView(out)
    view.rules([])
    view.rules([rule("InProgress")])
    view.rules([rule("InProgress")])
    view.line("Step=0, Loss=1e24")
    view.rules([rule("IssuesFound")])
    text = out.getvalue()
    assert text.count("Debugger Rule Status") == 2
    assert text.index("InProgress") < text.index("Step=0") < text.index("IssuesFound")
    assert isinstance(make_view(io.StringIO()), PlainView)  # not a terminal


def test_transitions_are_printed_once_and_again_when_only_the_message_changes() -> None:
    t0 = dt.datetime(2019, 11, 27, 10, 42, 2, tzinfo=dt.timezone.utc)
    desc: dict[str, Any] = {"SecondaryStatusTransitions": [
        {"Status": "Starting", "StartTime": t0, "StatusMessage": "Starting the training job"}]}
    lines, printed = _new_transitions(desc, (0, ""))
    assert [text for _, text in lines] == ["2019-11-27 10:42:02 Starting - Starting the training job"]
    assert _new_transitions(desc, printed)[0] == []
    desc["SecondaryStatusTransitions"][0]["StatusMessage"] = "Launching requested ML instances"
    lines, printed = _new_transitions(desc, printed)
    assert [text for _, text in lines] == ["2019-11-27 10:42:02 Starting - Launching requested ML instances"]
    desc["SecondaryStatusTransitions"] += [{"Status": "Training", "StartTime": t0 + dt.timedelta(seconds=5),
                                            "StatusMessage": "Training in progress."},
                                           {"Status": "Stopping", "StartTime": t0 + dt.timedelta(seconds=9),
                                            "StatusMessage": "stopped by rule"}]
    lines, _ = _new_transitions(desc, printed)
    assert [text for _, text in lines] == ["2019-11-27 10:42:07 Training - Training in progress.",
                                           "2019-11-27 10:42:11 Stopping - stopped by rule"]
    assert lines[0][0] < lines[1][0]


def test_summary_names_the_rule_the_step_and_the_tensors() -> None:
    desc = {"TrainingJobName": "job", "TrainingJobStatus": "Stopped", "SecondaryStatus": "Stopped",
            "SecondaryStatusTransitions": [{"Status": "Stopped", "StatusMessage": "Training job stopped by rule ExplodingTensor"}],
            "DebugRuleEvaluationStatuses": [rule("IssuesFound", details=DETAILS)],
            "ProfilerRuleEvaluationStatuses": [rule("NoIssuesFound", "ProfilerReport")],
            "TrainingTimeInSeconds": 6}
    lines = summary_lines(desc, "s3://b/job/debug-output")
    assert lines[0] == "Training job job ended: Stopped (Stopped)"
    assert "  status message: Training job stopped by rule ExplodingTensor" in lines
    assert "  rule ExplodingTensor: IssuesFound (fired at step 2)" in lines
    assert f"    {DETAILS}" in lines
    assert "  rule ProfilerReport: NoIssuesFound" in lines
    assert "  tensors: s3://b/job/debug-output" in lines
    assert fired_step("nothing here") is None


def test_failed_raises_with_the_reason_and_stopped_only_warns(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(UnexpectedStatusException, match="Reason: AlgorithmError: boom") as e:
        check_job_status({"TrainingJobName": "j", "TrainingJobStatus": "Failed", "FailureReason": "AlgorithmError: boom"})
    assert e.value.actual_status == "Failed" and e.value.allowed_statuses == ["Completed", "Stopped"]
    check_job_status({"TrainingJobName": "j", "TrainingJobStatus": "Stopped"})
    assert "rather than 'Completed'" in caplog.text
    check_job_status({"TrainingJobName": "j", "TrainingJobStatus": "Completed"})


def test_ctrl_c_prompt() -> None:
    asked: list[str] = []

    def answer(reply: str) -> Any:
        def prompt(question: str) -> str:
            asked.append(question)
            return reply
        return prompt

    assert ask_to_stop("job-1", answer("y")) is True
    assert ask_to_stop("job-1", answer("")) is False
    assert asked[0] == "Stop training job job-1? [y/N] "

    def eof(_question: str) -> str:
        raise EOFError

    with pytest.raises(KeyboardInterrupt):
        ask_to_stop("job-1", eof)


def test_live_view_redraws_the_box_below_the_log_on_a_terminal() -> None:
    from rich.console import Console

    from murphy.sdk.watch import LiveView

    buf = io.StringIO()
    view = LiveView(Console(file=buf, force_terminal=True, width=80, highlight=False))
    view.rules([rule("InProgress")])
    view.line("Step=0, Loss=1.02e+24")
    view.rules([rule("IssuesFound")])
    view.pause()
    view.resume()
    view.close()
    text = buf.getvalue()
    assert text.index("Step=0, Loss=1.02e+24") < text.rindex("ExplodingTensor: IssuesFound")
    assert "\x1b[" in text  # redrawn in place with cursor movements, not appended
    assert text.count("Step=0") == 1
