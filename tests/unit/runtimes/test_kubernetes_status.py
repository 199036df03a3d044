"""The Kubernetes → SageMaker mapping (murphy.runtimes.kubernetes_status.observe) as one table:
every row of docs/kubernetes.md's failure mapping is a JSON fixture of Job/Pod/Event objects
(``tests/data/kubernetes_status/*.json``; ``recorded: false`` = written by hand from the API's
shapes, to be replaced by captures from a real cluster) with the state it must give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from murphy.runtimes.kubernetes_status import Limits, epoch, observe

FIXTURES = sorted((Path(__file__).parents[2] / "data" / "kubernetes_status").glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def test_every_row_of_the_table_has_a_fixture() -> None:
    names = {p.stem for p in FIXTURES}
    rows = {"unschedulable-timeout", "image-pull-backoff-timeout", "err-image-pull-timeout", "invalid-image-name",
            "create-container-config-error", "oom-killed", "exit-137-no-reason", "exit-1-failure-file", "init-failed",
            "evicted-ephemeral-storage", "evicted-memory", "preempted-retrying", "disrupted-job-failed",
            "deadline-exceeded", "failure-target-pods-terminating", "kueue-suspended", "failed-create-timeout",
            "deleting", "gone-after-stop", "rule-exit-0", "rule-error", "two-hosts-one-failed"}
    assert rows <= names, rows - names


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_mapping(path: Path) -> None:
    case = load(path)
    anchor = case["anchor"]
    obs = observe(case["role"], case["job"], case["pods"], case["events"], now=epoch(case["now"]) or 0.0,
                  expected_uid=case["expected_uid"], hosts=case["hosts"], limits=Limits(image_pull_s=300, scheduling_s=1800),
                  stop_requested=bool(anchor.get("stop_requested")), recorded_failure=anchor.get("failure"))
    want = case["expect"]
    st = obs.state
    assert st.phase == want["phase"], case["description"]
    assert obs.give_up == want.get("give_up"), case["description"]
    if "exit_code" in want:
        assert st.exit_code == want["exit_code"]
    if "failure" in want:
        assert st.failure == want["failure"]
    if "failure_prefix" in want:
        assert st.failure is not None and st.failure.startswith(want["failure_prefix"]), st.failure
    if "stage" in want:
        assert st.stage == want["stage"]
    if "started_at" in want:
        assert st.started_at == epoch(want["started_at"])
    if "message_contains" in want:
        assert want["message_contains"] in obs.message, obs.message
    if "deleting" in want:
        assert obs.deleting is want["deleting"]
    if "log_sources" in want:
        assert len(obs.log_sources) == want["log_sources"]
    if "log_tail" in want:
        assert st.log_tail == want["log_tail"]
    if st.phase in ("exited", "missing") and want.get("failure", "") is not None and st.exit_code != 0:
        assert st.failure, "a failed container always says why"
    if obs.give_up:  # a give-up leaves the state live: the runtime deletes the Job, then reports it
        assert st.phase in ("pending", "running")


def test_timeouts_come_from_the_limits() -> None:
    case = load(next(p for p in FIXTURES if p.stem == "unschedulable-waiting"))
    args = (case["role"], case["job"], case["pods"], case["events"])
    now = epoch(case["now"]) or 0.0
    assert observe(*args, now=now, limits=Limits(scheduling_s=30)).give_up is not None
    assert observe(*args, now=now, limits=Limits(scheduling_s=120)).give_up is None
    assert observe(*args, now=now + 200, limits=Limits(scheduling_s=120)).give_up is not None
