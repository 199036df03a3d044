"""``murphy rule-eval`` in process: configuration, result and heartbeat files, every bad-parameter
path with its exact message, actions, the smdebug shim for custom rules."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from murphy.rules import registry
from murphy.rules.entrypoint import RunConfig, main, run

from .trialkit import TrialKit

# The AWS documentation's custom rule example, shared with the unit tests.
AWS_CUSTOM_RULE = (Path(__file__).resolve().parents[2] / "data" / "aws_custom_rule.py").read_text()


def write_job(where: Path, n: int = 10, bad_at: int | None = 7, bad: float = 50.0, end: bool = True) -> TrialKit:
    kit = TrialKit(where)
    for s in range(n):
        g = np.full(3, bad if s == bad_at else 0.1, np.float32)
        kit.step(s, {"gradient/fc_weight": g, "fc_weight": np.ones(3, np.float32)})
    if end:
        kit.end()
    return kit


@pytest.fixture
def job(tmp_path: Path) -> Path:
    write_job(tmp_path / "job")
    return tmp_path / "job"


@pytest.fixture
def custom_rule(tmp_path: Path) -> Path:
    path = tmp_path / "custom_rule.py"
    path.write_text(AWS_CUSTOM_RULE)
    return path


def rule_eval(tmp_path: Path, params: Any, *extra: str, base: Path | None = None) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "out"
    argv = ["--rule-parameters", params if isinstance(params, str) else json.dumps(params), "--result-dir", str(out)]
    if base is not None:
        argv += ["--base-trial", str(base)]
    code = main([*argv, *extra], environ={})
    return code, json.loads((out / "result.json").read_text())


def error_of(tmp_path: Path, params: Any, *extra: str, base: Path | None = None) -> str:
    code, res = rule_eval(tmp_path, params, *extra, base=base)
    assert (code, res["status"]) == (1, "Error"), res
    assert res["message"].endswith(res["reason"])
    reason: str = res["reason"]
    return reason


# ---- happy paths ---------------------------------------------------------------------------


def test_custom_rule_written_for_smdebug_runs_unchanged(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    params = {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule), "threshold": "20.0"}
    code, res = rule_eval(tmp_path, params, base=job)
    assert code == 0
    assert res["status"] == "IssuesFound" and res["step"] == 7
    assert res["rule_name"] == res["rule_to_invoke"] == "CustomGradientRule"
    assert res["message"] == "CustomGradientRule: condition met at step 7"
    assert res["steps_evaluated"] == 8
    assert res["started_at"].endswith("Z") and res["ended_at"] >= res["started_at"]
    # the shim is gone again: no global pollution of this process
    assert not [m for m in sys.modules if m == "smdebug" or m.startswith("smdebug.")]
    with pytest.raises(ImportError):
        __import__("smdebug")


def test_custom_rule_quiet_on_a_healthy_run(tmp_path: Path, custom_rule: Path) -> None:
    write_job(tmp_path / "ok", bad_at=None)
    params = {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": f"file://{custom_rule}"}
    code, res = rule_eval(tmp_path, params, base=tmp_path / "ok")
    assert (code, res["status"], res["step"], res["steps_evaluated"]) == (0, "NoIssuesFound", None, 10)
    assert res["message"] == "CustomGradientRule: no issues found (10 steps evaluated, last step 9)"
    assert res["reason"] == "training has ended"


def test_custom_rule_source_from_an_object_store(tmp_path: Path, job: Path) -> None:
    from murphy.storage import InMemoryObjectStore

    InMemoryObjectStore("rules-src").put("team/rule.py", AWS_CUSTOM_RULE.encode())
    params = {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": "memory://rules-src/team/rule.py", "threshold": "20"}
    code, res = rule_eval(tmp_path, params, base=job)
    assert (code, res["status"], res["step"]) == (0, "IssuesFound", 7)


def test_builtin_exploding_tensor_names_tensor_and_step(tmp_path: Path) -> None:
    pytest.importorskip("murphy.rules.builtin.exploding_tensor")
    kit = TrialKit(tmp_path / "job")
    for s in range(6):
        kit.step(s, {"gradient/fc_weight": np.array([1.0, np.nan if s >= 4 else 1.0], np.float32)})
    kit.end()
    code, res = rule_eval(tmp_path, {"rule_to_invoke": "explodingtensor"}, base=tmp_path / "job")
    assert (code, res["status"], res["step"], res["tensor"]) == (0, "IssuesFound", 4, "gradient/fc_weight")
    assert "gradient/fc_weight" in res["message"] and "step 4" in res["message"]


def test_non_finite_values_are_strings_so_the_result_stays_strict_json(tmp_path: Path, job: Path) -> None:
    src = tmp_path / "nan_rule.py"
    src.write_text(textwrap.dedent(
        """\
        from murphy.rules import Rule

        class NanRule(Rule):
            def invoke_at_step(self, step):
                return step == 2 and self.found(step, "w is nan at step 2", tensor="w", value=float("nan"))
        """
    ))
    code, res = rule_eval(tmp_path, {"rule_to_invoke": "NanRule", "source_s3_uri": str(src)}, base=job)
    assert (code, res["step"], res["tensor"], res["value"]) == (0, 2, "w", "nan")
    assert res["findings"] == [{"step": 2, "message": "w is nan at step 2", "tensor": "w", "value": "nan"}]
    json.loads((tmp_path / "out" / "result.json").read_text(), parse_constant=lambda c: pytest.fail(f"bare {c}"))


def test_environment_configures_the_run(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    env = {
        "MURPHY_RULE_PARAMETERS": json.dumps({"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule), "threshold": "20"}),
        "MURPHY_BASE_TRIAL": str(job),
        "MURPHY_RESULT_PATH": f"file://{tmp_path}/envout",
        "MURPHY_RULE_NAME": "my-gradient-check",
        "MURPHY_TRAINING_JOB_NAME": "job-1",
    }
    assert main([], environ=env) == 0
    res = json.loads((tmp_path / "envout" / "result.json").read_text())
    assert (res["status"], res["rule_name"], res["training_job_name"]) == ("IssuesFound", "my-gradient-check", "job-1")


def test_rule_parameters_from_a_file_and_step_range(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    pfile = tmp_path / "params.json"
    pfile.write_text(json.dumps({"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule),
                                 "threshold": "20", "start_step": "2", "end_step": "7"}))
    code, res = rule_eval(tmp_path, f"@{pfile}", base=job)
    assert (code, res["status"], res["steps_evaluated"], res["last_step"]) == (0, "NoIssuesFound", 5, 6)
    code, res = rule_eval(tmp_path, f"@{pfile}", "--end-step", "8", base=job)  # the flag wins
    assert (res["status"], res["step"]) == ("IssuesFound", 7)


def test_base_trial_may_come_from_rule_parameters(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    params = {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule), "threshold": "20", "base_trial": str(job)}
    code, res = rule_eval(tmp_path, params)
    assert (code, res["status"], res["base_trial"]) == (0, "IssuesFound", str(job))


def test_all_findings(tmp_path: Path, custom_rule: Path) -> None:
    kit = write_job(tmp_path / "job", bad_at=3, end=False)
    kit.step(10, {"gradient/fc_weight": np.full(3, 99.0, np.float32)}).end()
    params = {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule), "threshold": "20"}
    code, res = rule_eval(tmp_path, params, "--all-findings", base=tmp_path / "job")
    assert [f["step"] for f in res["findings"]] == [3, 10]
    assert (code, res["status"], res["step"]) == (0, "IssuesFound", 3)


# ---- bad parameters: exact messages --------------------------------------------------------


def test_rule_parameters_not_json(tmp_path: Path, job: Path) -> None:
    reason = error_of(tmp_path, "{rule_to_invoke: X}", base=job)
    assert reason.startswith("RuleParameters is not valid JSON: Expecting property name enclosed in double quotes")


def test_rule_parameters_not_an_object(tmp_path: Path, job: Path) -> None:
    assert error_of(tmp_path, '["ExplodingTensor"]', base=job) == "RuleParameters must be a JSON object of strings, got list"


def test_rule_parameters_file_missing(tmp_path: Path, job: Path) -> None:
    reason = error_of(tmp_path, f"@{tmp_path}/nope.json", base=job)
    assert reason == f"cannot read RuleParameters file {tmp_path}/nope.json: No such file or directory"


def test_missing_rule_to_invoke(tmp_path: Path, job: Path) -> None:
    assert error_of(tmp_path, {"threshold": "1"}, base=job) == (
        'RuleParameters has no rule_to_invoke (the rule to run, e.g. "ExplodingTensor", or the class name in source_s3_uri)'
    )


def test_unknown_rule(tmp_path: Path, job: Path) -> None:
    reason = error_of(tmp_path, {"rule_to_invoke": "ExplodingTensr"}, base=job)
    assert reason == (
        f"unknown rule 'ExplodingTensr': not a built-in rule (built-in rules: {', '.join(sorted(registry.BUILTIN_MODULES))}); "
        "a custom rule needs source_s3_uri"
    )


def test_builtin_rule_module_missing(tmp_path: Path, job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BUILTIN_MODULES, "Imaginary", "imaginary")
    reason = error_of(tmp_path, {"rule_to_invoke": "IMAGINARY"}, base=job)
    assert reason == "built-in rule Imaginary is not available: module murphy.rules.builtin.imaginary is missing"


def test_unknown_parameter_names_it_and_suggests(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    params = {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule), "treshold": "20"}
    assert error_of(tmp_path, params, base=job) == (
        "unknown parameter 'treshold' for CustomGradientRule (accepted: threshold); did you mean 'threshold'?"
    )


def test_unknown_parameter_of_a_builtin(tmp_path: Path, job: Path) -> None:
    pytest.importorskip("murphy.rules.builtin.exploding_tensor")
    reason = error_of(tmp_path, {"rule_to_invoke": "ExplodingTensor", "only_nann": "true"}, base=job)
    assert "only_nann" in reason and "ExplodingTensor" in reason


def test_unparsable_number_in_a_custom_rule(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    params = {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule), "threshold": "abc"}
    assert error_of(tmp_path, params, base=job) == (
        "CustomGradientRule could not be constructed with RuleParameters {'threshold': 'abc'}: "
        "ValueError: could not convert string to float: 'abc'"
    )


def test_unparsable_number_with_murphys_parsers(tmp_path: Path, job: Path) -> None:
    src = tmp_path / "strict.py"
    src.write_text(textwrap.dedent(
        """\
        from murphy.rules import Rule
        from murphy.rules.params import as_float

        class Strict(Rule):
            def __init__(self, base_trial, threshold="1"):
                super().__init__(base_trial)
                self.threshold = as_float(threshold, "threshold", "Strict")

            def invoke_at_step(self, step):
                return False
        """
    ))
    reason = error_of(tmp_path, {"rule_to_invoke": "Strict", "source_s3_uri": str(src), "threshold": "1e-3x"}, base=job)
    assert reason == "Strict: parameter threshold='1e-3x' is not a number"


def test_missing_required_parameter(tmp_path: Path, job: Path) -> None:
    src = tmp_path / "needs.py"
    src.write_text(AWS_CUSTOM_RULE.replace("threshold=10.0", "threshold").replace("CustomGradientRule", "NeedsThreshold"))
    reason = error_of(tmp_path, {"rule_to_invoke": "NeedsThreshold", "source_s3_uri": str(src)}, base=job)
    assert reason == "missing required parameter 'threshold' for NeedsThreshold"


def test_other_trials_for_a_rule_that_takes_none(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    params = {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule), "other_trial_0": str(job)}
    assert error_of(tmp_path, params, base=job) == (
        "CustomGradientRule does not take other trials, but RuleParameters has 1 other_trial_<i> key(s)"
    )


def test_bad_start_step(tmp_path: Path, job: Path) -> None:
    reason = error_of(tmp_path, {"rule_to_invoke": "ExplodingTensor", "start_step": "ten"}, base=job)
    assert reason == "RuleParameters: parameter start_step='ten' is not an integer"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("class Broken(:\n    pass\n", "does not compile: "),
        ("import tensorflow_not_here\n", "failed to import: ModuleNotFoundError: No module named 'tensorflow_not_here'"),
        ("raise RuntimeError('needs a GPU')\n", "failed to import: RuntimeError: needs a GPU"),
    ],
    ids=["syntax", "import", "runtime"],
)
def test_custom_source_that_does_not_import(tmp_path: Path, job: Path, source: str, expected: str) -> None:
    src = tmp_path / "bad_rule.py"
    src.write_text(source)
    reason = error_of(tmp_path, {"rule_to_invoke": "Broken", "source_s3_uri": str(src)}, base=job)
    assert reason.startswith(f"custom rule source {src} {expected}")
    if expected.startswith("does not compile"):
        assert reason.endswith("(line 1)")


def test_custom_source_missing(tmp_path: Path, job: Path) -> None:
    reason = error_of(tmp_path, {"rule_to_invoke": "X", "source_s3_uri": f"{tmp_path}/nope.py"}, base=job)
    assert reason == f"cannot read custom rule source {tmp_path}/nope.py: No such file or directory"


def test_custom_class_not_in_source(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    reason = error_of(tmp_path, {"rule_to_invoke": "GradientRule", "source_s3_uri": str(custom_rule)}, base=job)
    assert reason == f"custom rule source {custom_rule} defines no rule class 'GradientRule' (rule classes found: CustomGradientRule)"


def test_custom_class_name_case_insensitive(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    params = {"rule_to_invoke": "customgradientrule", "source_s3_uri": str(custom_rule), "threshold": "20"}
    assert rule_eval(tmp_path, params, base=job)[1]["step"] == 7


def test_no_base_trial(tmp_path: Path, custom_rule: Path) -> None:
    reason = error_of(tmp_path, {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule)})
    assert reason == "no base trial: pass --base-trial URI or set MURPHY_BASE_TRIAL"


def test_base_trial_that_cannot_be_opened(tmp_path: Path, custom_rule: Path) -> None:
    params = {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule)}
    reason = error_of(tmp_path, params, "--base-trial", "ftp://host/job")
    assert reason.startswith("cannot open trial ftp://host/job: StorageError: unsupported store URI scheme")


def test_rule_error_at_a_step_is_reported(tmp_path: Path, job: Path) -> None:
    src = tmp_path / "oops.py"
    src.write_text("from smdebug.rules import Rule\nclass Oops(Rule):\n    def invoke_at_step(self, step):\n        return 1 / (3 - step) < 0\n")
    code, res = rule_eval(tmp_path, {"rule_to_invoke": "Oops", "source_s3_uri": str(src)}, base=job)
    assert (code, res["status"], res["reason"]) == (1, "Error", "ZeroDivisionError: division by zero")
    assert res["message"] == "Oops: error at step 3"


def test_usage_errors_exit_2_without_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--rule-parameters", "{}"], environ={}) == 2
    assert "no result location: pass --result-dir PATH|URI or set MURPHY_RESULT_PATH" in capsys.readouterr().err
    assert main(["--result-dir", str(tmp_path)], environ={}) == 2
    assert "no RuleParameters" in capsys.readouterr().err
    assert main(["--rule-parameters", "{}", "--result-dir", str(tmp_path)], environ={"MURPHY_POLL_INTERVAL": "fast"}) == 2
    assert "poll interval='fast' is not a number" in capsys.readouterr().err
    assert not (tmp_path / "result.json").exists()


# ---- actions -------------------------------------------------------------------------------


def _with_actions(custom_rule: Path, actions: Any, threshold: str = "20") -> dict[str, str]:
    return {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule), "threshold": threshold,
            "action_json": actions if isinstance(actions, str) else json.dumps(actions)}


def test_actions_are_recorded_for_the_control_plane(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    actions = [{"Name": "StopTraining", "training_job_prefix": "job"}, {"name": "email", "endpoint": "Ops@Example.com"},
               {"name": "SMS", "endpoint": "+15555550100"}]
    code, res = rule_eval(tmp_path, _with_actions(custom_rule, actions), "--training-job-name", "job-1", base=job)
    assert (code, res["status"]) == (0, "IssuesFound")
    assert res["actions"] == [
        {"name": "stoptraining", "training_job_name": "job-1", "training_job_prefix": "job"},
        {"name": "email", "endpoint": "Ops@Example.com"},
        {"name": "sms", "endpoint": "+15555550100"},
    ]


def test_action_json_as_the_sagemaker_sdk_escapes_it(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    # smdebug-rulesconfig's ActionList serialises with backslash-escaped quotes inside the value.
    sdk_value = '[{\\"name\\": \\"stoptraining\\", \\"training_job_prefix\\": \\"job\\"}, {\\"endpoint\\": \\"a@b.co\\", \\"name\\": \\"email\\"}]'
    assert '\\"name\\"' in sdk_value
    code, res = rule_eval(tmp_path, _with_actions(custom_rule, sdk_value), "--training-job-name", "job-1", base=job)
    assert (code, res["status"]) == (0, "IssuesFound")
    assert res["actions"] == [
        {"name": "stoptraining", "training_job_name": "job-1", "training_job_prefix": "job"},
        {"name": "email", "endpoint": "a@b.co"},
    ]


def test_actions_only_when_issues_found(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    params = _with_actions(custom_rule, {"name": "stoptraining", "training_job_prefix": "j"}, threshold="1000")
    code, res = rule_eval(tmp_path, params, "--training-job-name", "job-1", base=job)
    assert (code, res["status"], res["actions"]) == (0, "NoIssuesFound", [])


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        ("{name: stoptraining}", "action_json is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        ([{"name": "page"}], "action_json[0]: unknown action name 'page' (known: email, sms, stoptraining)"),
        ([{"name": "email", "endpoint": "ops"}], "action_json[0]: action email needs endpoint = an email address, got 'ops'"),
        ([{"name": "sms"}], "action_json[0]: action sms needs endpoint = a phone number like +15555550100, got None"),
        ({"name": "email", "endpoint": "a@b.io", "topic": "x"}, "action_json[0]: unknown key(s) topic for action email (accepted: name, endpoint)"),
        (["stoptraining"], "action_json[0] must be an object like {\"name\": \"stoptraining\"}, got 'stoptraining'"),
    ],
    ids=["json", "name", "email", "sms", "key", "shape"],
)
def test_bad_actions(tmp_path: Path, job: Path, custom_rule: Path, actions: Any, expected: str) -> None:
    assert error_of(tmp_path, _with_actions(custom_rule, actions), "--training-job-name", "j", base=job) == expected


def test_stoptraining_needs_the_exact_job_name(tmp_path: Path, job: Path, custom_rule: Path) -> None:
    reason = error_of(tmp_path, _with_actions(custom_rule, {"name": "stoptraining", "training_job_prefix": "job"}), base=job)
    assert reason == (
        "action_json[0]: action stoptraining needs the exact training job name to stop "
        "(--training-job-name or MURPHY_TRAINING_JOB_NAME); murphy never stops jobs by prefix"
    )


# ---- heartbeat, live runs, stopping --------------------------------------------------------


def test_heartbeat_while_running_then_result(tmp_path: Path, custom_rule: Path) -> None:
    kit = write_job(tmp_path / "job", n=3, bad_at=None, end=False)
    out = tmp_path / "out"
    config = RunConfig(
        rule_parameters=json.dumps({"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule)}),
        result_dir=str(out), base_trial=str(tmp_path / "job"), poll_interval=0.02, heartbeat_interval=0.05,
    )
    box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: box.update(zip(("doc", "code"), run(config), strict=True)))
    worker.start()
    beats: list[dict[str, Any]] = []
    deadline = time.monotonic() + 5
    while len({b["timestamp"] for b in beats}) < 3 and time.monotonic() < deadline:
        if (out / "heartbeat.json").exists():
            beats.append(json.loads((out / "heartbeat.json").read_text()))
        time.sleep(0.03)
    assert not (out / "result.json").exists()
    kit.step(3, {"gradient/fc_weight": np.full(3, 99.0, np.float32)}).end()
    worker.join(5)
    assert len({b["timestamp"] for b in beats}) >= 3, "heartbeat not refreshed"
    assert {b["status"] for b in beats} == {"InProgress"}
    assert beats[-1]["rule_name"] == "CustomGradientRule" and beats[-1]["last_step"] == 2
    assert (box["code"], box["doc"]["status"], box["doc"]["step"]) == (0, "IssuesFound", 3)
    final = json.loads((out / "heartbeat.json").read_text())
    assert (final["status"], final["last_step"]) == ("IssuesFound", 3)


def test_should_stop_gives_stopped_and_exit_143(tmp_path: Path, custom_rule: Path) -> None:
    write_job(tmp_path / "job", n=3, bad_at=None, end=False)
    config = RunConfig(
        rule_parameters=json.dumps({"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(custom_rule)}),
        result_dir=str(tmp_path / "out"), base_trial=str(tmp_path / "job"), poll_interval=0.02,
    )
    deadline = time.monotonic() + 0.3
    doc, code = run(config, should_stop=lambda: time.monotonic() > deadline)
    assert (code, doc["status"], doc["steps_evaluated"]) == (143, "Stopped", 3)
