"""Issue 14 in the supervisor: launch and stop of one job are ordered, and a job is terminal only
once every container it launched (or may have launched) is gone. Driven with the fake runtime,
whose ``during_launch`` hook holds a launch in flight while the test stops the job."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_supervisor import Harness, request, statuses

from murphy.exceptions import RuntimeBackendError
from murphy.jobs.plans import rule_plan, training_plan
from murphy.jobs.reconciler import Reconciler
from murphy.runtimes.base import ContainerState, Plan
from murphy.runtimes.fake import FakeRuntime

ACCOUNT = {"account": "123456789012", "region": "us-west-2"}


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def live(rt: FakeRuntime, job: str = "job-1") -> list[str]:
    """What the runtime itself says still exists of the job (not what the record says)."""
    return sorted(c.container_name for c in rt.list_containers(job) if c.live)


class HeldLaunch:
    """Holds the first launch of ``container`` inside the runtime until released; the supervisor
    pass runs in a thread meanwhile. ``fail`` makes the held launch raise once released (the
    container was created all the same, as an engine error after ``create`` leaves it)."""

    def __init__(self, h: Harness, container: str = "job-1-training", fail: bool = False) -> None:
        self.h, self.container, self.fail = h, container, fail
        self.entered, self.release = threading.Event(), threading.Event()
        h.runtime.during_launch = self._during
        self.thread = threading.Thread(target=h.supervisor.run_once)

    def _during(self, plan: Plan) -> None:
        if plan.container_name != self.container or self.entered.is_set():
            return
        self.entered.set()
        assert self.release.wait(10)
        if self.fail:
            raise RuntimeBackendError(f"engine error starting {plan.container_name}")

    def __enter__(self) -> HeldLaunch:
        self.thread.start()
        assert self.entered.wait(10), "the supervisor never launched"
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()
        self.thread.join(10)
        assert not self.thread.is_alive()


def test_stop_during_launch_waits_for_it_then_stops_what_it_started(h: Harness) -> None:
    h.service.create_training_job(request(rules=1), **ACCOUNT)
    with HeldLaunch(h):
        h.service.stop_training_job("job-1")  # answers at once, as AWS does
        assert h.service.describe_training_job("job-1")["TrainingJobStatus"] == "Stopping"
    # The launch's handles landed on the record the stop wrote, not on a stale copy.
    rec = h.store.get("job-1")
    assert rec.training is not None and rec.rules[0].handle is not None
    assert live(h.runtime) == ["job-1-rule-0", "job-1-training"]
    for _ in range(3):  # never Stopped while anything it launched still runs
        job = h.tick()
        assert job["TrainingJobStatus"] == "Stopping", job
    assert ("job-1-training", False) in h.runtime.stops and ("job-1-rule-0", False) in h.runtime.stops
    h.training(phase="exited", exit_code=143)
    assert h.tick()["TrainingJobStatus"] == "Stopping"  # the rule still runs
    h.rule(0, phase="exited", exit_code=0)
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert statuses(job) == ["Stopped"] and "FailureReason" not in job


def test_launch_failing_during_stop_leaves_nothing_and_ends_stopped(h: Harness) -> None:
    h.service.create_training_job(request(rules=1), **ACCOUNT)
    with HeldLaunch(h, fail=True):
        h.service.stop_training_job("job-1")
    # The half-made container was killed and removed before the job could end.
    assert ("job-1-training", True) in h.runtime.stops and "job-1-training" in h.runtime.removed
    assert live(h.runtime) == []
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert statuses(job) == ["Stopped"] and "FailureReason" not in job  # the stop came first
    assert [p.container_name for p in h.runtime.launched] == ["job-1-training"]  # no rule was started


def test_launch_failing_without_a_stop_still_fails_the_job_and_leaves_nothing(h: Harness) -> None:
    h.service.create_training_job(request(rules=1), **ACCOUNT)
    with HeldLaunch(h, fail=True):
        pass
    job = h.service.describe_training_job("job-1")
    assert job["TrainingJobStatus"] == "Failed" and "engine error starting job-1-training" in job["FailureReason"]
    assert live(h.runtime) == []


def test_a_rule_launch_failing_during_stop_is_cleared_too(h: Harness) -> None:
    h.service.create_training_job(request(rules=1), **ACCOUNT)
    with HeldLaunch(h, container="job-1-rule-0", fail=True):
        h.service.stop_training_job("job-1")
    assert live(h.runtime) == ["job-1-training"]  # the rule's half-made container is gone
    rec = h.store.get("job-1")
    assert rec.training is not None and rec.rules[0].status.value == "Error"
    h.tick()
    assert ("job-1-training", False) in h.runtime.stops
    h.training(phase="exited", exit_code=143)
    job = h.tick()
    assert job["TrainingJobStatus"] == "Stopped" and live(h.runtime) == []
    assert statuses(job) == ["Error"] and "engine error starting job-1-rule-0" in job["DebugRuleEvaluationStatuses"][0]["StatusDetails"]


def test_stop_while_starting_is_answered_and_honoured(h: Harness) -> None:
    h.service.create_training_job(request(rules=1), **ACCOUNT)
    h.service.stop_training_job("job-1")  # still Starting: nothing launched yet
    job = h.service.describe_training_job("job-1")
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopping", "Stopping")
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert h.runtime.launch_calls == [] and statuses(job) == ["Stopped"]


def test_stopped_before_its_launch_was_recorded_clears_what_a_crash_left(h: Harness) -> None:
    h.service.create_training_job(request(rules=1), **ACCOUNT)
    rec = h.store.get("job-1")
    h.runtime.launch(training_plan(rec))  # a service that died before recording it
    h.service.stop_training_job("job-1")
    job = h.tick()
    assert ("job-1-training", True) in h.runtime.stops and live(h.runtime) == []
    assert job["TrainingJobStatus"] == "Stopped"


def test_a_verdict_from_a_running_rule_container_does_not_end_the_job_before_it_is_gone(h: Harness) -> None:
    h.service.create_training_job(request(rules=1), **ACCOUNT)
    h.tick()
    h.training(phase="running", stage="Training")
    h.rule(0, phase="running")
    h.result("Rule0", "IssuesFound", running=True, step=2, message="nan")
    h.tick(1.1)  # the result poll reads it: Stopping
    h.training(phase="exited", exit_code=143)
    job = h.tick()
    assert job["TrainingJobStatus"] == "Stopping" and statuses(job) == ["IssuesFound"]
    assert h.runtime.stop_calls("job-1-rule-0") == [False]  # SIGTERM to the lingering evaluator
    assert h.tick(6)["TrainingJobStatus"] == "Stopping"  # past the grace: SIGKILL
    assert h.runtime.stop_calls("job-1-rule-0") == [False, True]
    h.rule(0, phase="exited", exit_code=137)
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert statuses(job) == ["IssuesFound"]


def test_a_missing_container_has_its_leftovers_killed(h: Harness) -> None:
    h.service.create_training_job(request(rules=0), **ACCOUNT)
    h.tick()
    h.training(phase="missing")
    job = h.tick()
    assert job["TrainingJobStatus"] == "Failed"
    assert h.runtime.stop_calls("job-1-training") == [True]


# --- restart: re-attachment and the reconciler ------------------------------------------------


def test_containers_launched_but_not_recorded_are_reattached_not_relaunched(h: Harness) -> None:
    h.service.create_training_job(request(rules=1), **ACCOUNT)
    rec = h.store.get("job-1")
    h.runtime.launch(training_plan(rec))  # the last service launched both and died
    h.runtime.launch(rule_plan(rec, rec.rules[0], 0, h.settings))
    assert Reconciler(h.store, h.runtime).sweep() == []  # a live job's: left to its launch
    h.tick()
    rec = h.store.get("job-1")
    assert rec.training is not None and rec.training.id == "job-1-training" and rec.rules[0].handle is not None
    assert len(h.runtime.launched) == 2 and h.runtime.stops == []


def test_the_reconciler_stops_what_no_live_job_accounts_for(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    h.service.create_training_job(request("job-1", rules=1), **ACCOUNT)
    h.service.create_training_job(request("done", rules=0), **ACCOUNT)
    h.service.create_training_job(request("stopping", rules=0), **ACCOUNT)
    h.tick()  # all three launched
    h.runtime.set_state("done-training", ContainerState("exited", exit_code=0))
    h.tick()
    assert h.store.get("done").status.value == "Completed"
    rt = h.runtime
    # What other services or a crash left: a container of the terminal job again (its name
    # re-used), one of a job nobody knows, one job-1 has no slot for, and one a stopping job
    # never recorded.
    done = h.store.get("done")
    rt.forget("done-training")
    rt.launch(training_plan(done))
    rt.launch(replace(training_plan(done), container_name="ghost-training", job_name="ghost"))
    extra = rule_plan(h.store.get("job-1"), h.store.get("job-1").rules[0], 5, h.settings)
    rt.launch(extra)
    stopping = h.store.get("stopping")
    h.service.stop_training_job("stopping")
    rec = h.store.get("stopping")
    rec.training = None  # as if its launch had never been recorded
    h.store.update(rec)
    rt.forget("stopping-training")
    rt.launch(training_plan(stopping))
    with caplog.at_level("WARNING", logger="murphy.jobs.reconciler"):
        swept = Reconciler(h.store, rt).sweep()
    reasons = {s.container_name: s.reason for s in swept}
    assert set(reasons) == {"done-training", "ghost-training", "job-1-rule-5", "stopping-training"}
    assert reasons["done-training"] == "its job is Completed"
    assert reasons["ghost-training"] == "no job 'ghost' in the store"
    assert reasons["job-1-rule-5"].startswith("owned by nobody")
    assert "stopping and never recorded it" in reasons["stopping-training"]
    assert all(name in caplog.text for name in reasons)
    assert sorted(c.container_name for c in rt.list_containers()) == ["job-1-rule-0", "job-1-training"]


def test_the_reconciler_leaves_a_recorded_container_and_kills_an_impostor(h: Harness) -> None:
    h.service.create_training_job(request(rules=0), **ACCOUNT)
    h.tick()
    assert Reconciler(h.store, h.runtime).sweep() == []
    rec = h.store.get("job-1")
    assert rec.training is not None
    rec.training.id = "another-container"  # the record names another container under that name
    h.store.update(rec)
    swept = Reconciler(h.store, h.runtime).sweep()
    assert [s.container_name for s in swept] == ["job-1-training"]
    assert "records container another-container" in swept[0].reason


def test_a_stop_written_after_the_pass_read_the_job_prevents_its_launch(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    h.service.create_training_job(request(rules=1), **ACCOUNT)
    stale = h.store.active()  # the pass's copies, read before the stop
    h.service.stop_training_job("job-1")
    with monkeypatch.context() as m:
        m.setattr(h.store, "active", lambda: stale)
        h.supervisor.run_once()
    assert h.runtime.launch_calls == []  # prevented, not started and then stopped
    assert h.service.describe_training_job("job-1")["TrainingJobStatus"] == "Stopped"


def test_the_supervisor_sweeps_at_start_and_then_periodically(tmp_path: Path) -> None:
    h = Harness(tmp_path, reconciler_interval_s=0.2, reconcile_interval_s=0.05)
    h.runtime.launch(replace(training_plan(_record(h)), container_name="ghost-training", job_name="ghost"))
    h.supervisor.start()
    try:
        deadline = time.monotonic() + 5
        while "ghost-training" not in h.runtime.removed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert h.runtime.removed == ["ghost-training"]  # at start
        h.runtime.launch(replace(training_plan(_record(h)), container_name="ghost2-training", job_name="ghost2"))
        while "ghost2-training" not in h.runtime.removed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "ghost2-training" in h.runtime.removed  # and again a sweep later
    finally:
        h.supervisor.close()


def _record(h: Harness) -> Any:
    from murphy.jobs.model import JobRecord

    return JobRecord.new("x", "arn:aws:sagemaker:us-west-2:123456789012:training-job/x", "123456789012", "us-west-2",
                         request("x", rules=0), 0.0)
