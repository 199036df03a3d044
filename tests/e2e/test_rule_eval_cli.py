"""Black-box: ``murphy rule-eval`` / ``python -m murphy.rules`` as real processes, the way a rule
container runs: a SageMaker-style custom rule file unchanged, a built-in rule, errors, SIGTERM,
and a live training job written while the rule watches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from murphy.core.collection import Collection, CollectionsDoc
from murphy.storage import LocalObjectStore
from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training

MURPHY = str(Path(sys.executable).parent / "murphy")

# The AWS documentation's custom rule example, shared with the unit tests.
AWS_CUSTOM_RULE = (Path(__file__).resolve().parents[1] / "data" / "aws_custom_rule.py").read_text()


def start_job(root: Path) -> LocalObjectStore:
    store = LocalObjectStore(root)
    colls = {"gradients": Collection("gradients", include_regex="^gradient"), "weights": Collection("weights", include_regex="^(?!gradient).*weight")}
    write_collections(store, CollectionsDoc(colls), "worker_0")
    return store


def write_step(store: LocalObjectStore, step: int, grad: float) -> None:
    with StepWriter(store, step, "worker_0") as w:
        w.add("gradient/fc_weight", np.full((4,), grad, np.float32))
        w.add("fc_weight", np.ones((4,), np.float32))


def rule_eval(args: list[str], env: dict[str, str] | None = None, module: bool = False) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "murphy.rules"] if module else [MURPHY, "rule-eval"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})


def result(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / "result.json").read_text())
    return doc


@pytest.fixture
def finished_job(tmp_path: Path) -> Path:
    store = start_job(tmp_path / "job")
    for s in range(12):
        write_step(store, s, 50.0 if s == 9 else 0.01)
    write_end_of_training(store)
    return tmp_path / "job"


@pytest.mark.parametrize("module", [False, True], ids=["murphy-rule-eval", "python-m-murphy.rules"])
def test_aws_custom_rule_runs_unchanged(tmp_path: Path, finished_job: Path, module: bool) -> None:
    (tmp_path / "my_rule.py").write_text(AWS_CUSTOM_RULE)
    params = {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(tmp_path / "my_rule.py"), "threshold": "20.0"}
    proc = rule_eval(["--rule-parameters", json.dumps(params), "--base-trial", str(finished_job),
                      "--result-dir", str(tmp_path / "out"), "--rule-name", "CustomGradient"], module=module)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "IssuesFound: CustomGradientRule: condition met at step 9"
    res = result(tmp_path / "out")
    assert (res["status"], res["step"], res["rule_name"], res["rule_to_invoke"]) == ("IssuesFound", 9, "CustomGradient", "CustomGradientRule")
    # nothing leaked into this (parent) process
    with pytest.raises(ImportError):
        __import__("smdebug")


def test_builtin_rule_via_environment(tmp_path: Path) -> None:
    pytest.importorskip("murphy.rules.builtin.exploding_tensor")
    store = start_job(tmp_path / "job")
    for s in range(8):
        write_step(store, s, float("inf") if s == 5 else 0.1)
    write_end_of_training(store)
    env = {"MURPHY_RULE_PARAMETERS": json.dumps({"rule_to_invoke": "ExplodingTensor", "collection_names": "gradients"}),
           "MURPHY_BASE_TRIAL": f"file://{tmp_path}/job", "MURPHY_RESULT_PATH": str(tmp_path / "out")}
    proc = rule_eval([], env=env)
    assert proc.returncode == 0, proc.stderr
    res = result(tmp_path / "out")
    assert (res["status"], res["step"], res["tensor"]) == ("IssuesFound", 5, "gradient/fc_weight")


def test_bad_parameters_exit_1_with_the_reason(tmp_path: Path, finished_job: Path) -> None:
    proc = rule_eval(["--rule-parameters", '{"rule_to_invoke": "VanishingGradiant"}', "--base-trial", str(finished_job),
                      "--result-dir", str(tmp_path / "out")])
    assert proc.returncode == 1
    res = result(tmp_path / "out")
    assert res["status"] == "Error"
    assert res["reason"].startswith("unknown rule 'VanishingGradiant': not a built-in rule")
    assert proc.stdout.startswith("Error: VanishingGradiant: unknown rule 'VanishingGradiant'")


def test_sigterm_writes_stopped_and_exits_143(tmp_path: Path) -> None:
    store = start_job(tmp_path / "job")
    write_step(store, 0, 0.1)  # the job never ends
    (tmp_path / "my_rule.py").write_text(AWS_CUSTOM_RULE)
    params = {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(tmp_path / "my_rule.py")}
    out = tmp_path / "out"
    proc = subprocess.Popen([MURPHY, "rule-eval", "--rule-parameters", json.dumps(params), "--base-trial", str(tmp_path / "job"),
                             "--result-dir", str(out), "--heartbeat-interval", "0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if (out / "heartbeat.json").exists() and json.loads((out / "heartbeat.json").read_text())["last_step"] == 0:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    res = result(out)
    assert (res["status"], res["reason"], res["last_step"]) == ("Stopped", "stopped by signal SIGTERM", 0)
    assert json.loads((out / "heartbeat.json").read_text())["status"] == "Stopped"


def test_live_job_is_caught_within_a_second(tmp_path: Path) -> None:
    """The training process writes a step every 50 ms; the rule process reports the bad one."""
    store = start_job(tmp_path / "job")
    (tmp_path / "my_rule.py").write_text(AWS_CUSTOM_RULE)
    params = {"rule_to_invoke": "CustomGradientRule", "source_s3_uri": str(tmp_path / "my_rule.py"), "threshold": "20"}
    out = tmp_path / "out"
    proc = subprocess.Popen([MURPHY, "rule-eval", "--rule-parameters", json.dumps(params), "--base-trial", str(tmp_path / "job"),
                             "--result-dir", str(out), "--poll-interval", "0.05"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        written_bad = None
        for s in range(200):
            write_step(store, s, 99.0 if s == 30 else 0.01)
            if s == 30:
                written_bad = time.monotonic()
            if (out / "result.json").exists():
                break
            time.sleep(0.05)
        detected = None
        deadline = time.monotonic() + 10
        while detected is None and time.monotonic() < deadline:
            if (out / "result.json").exists():
                detected = time.monotonic()
            time.sleep(0.01)
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert result(out)["step"] == 30
    assert written_bad is not None and detected is not None
    # Detection latency includes the rule process's start-up only if it started late; allow 1 s.
    assert detected - written_bad < 1.0
