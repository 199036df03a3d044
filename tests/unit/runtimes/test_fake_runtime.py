"""FakeRuntime: records, scripted states, logs, idempotent launch, launch failures."""

from __future__ import annotations

from dataclasses import replace

import pytest

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes.base import ContainerState, RulePlan, Runtime, TrainingPlan
from murphy.runtimes.fake import FakeRuntime


def plan(name: str = "job-1-training", image: str = "murphy/linear-regression-demo:latest") -> TrainingPlan:
    return TrainingPlan(container_name=name, job_name="job-1", image=image, hyperparameters={}, environment={},
                        instance_type="ml.m5.xlarge", instance_count=1)


def test_is_a_runtime_and_launch_is_idempotent() -> None:
    rt = FakeRuntime(clock=lambda: 100.0)
    assert isinstance(rt, Runtime)
    h = rt.launch(plan())
    assert rt.launch(plan()) == h
    assert rt.launched == [plan()] and len(rt.launch_calls) == 2
    assert rt.status(h) == ContainerState("running", started_at=100.0)


def test_scripted_state_logs_stop_and_remove() -> None:
    rt = FakeRuntime(clock=lambda: 1.5)
    h = rt.launch(plan())
    rt.add_log("job-1-training", "Step=0")
    rt.add_log("job-1-training", "Step=1", timestamp_ms=7)
    page = rt.read_logs(h)
    assert [(e.message, e.timestamp_ms) for e in page.events] == [("Step=0", 1500), ("Step=1", 7)]
    assert rt.read_logs(h, page.next_cursor).events == []
    assert rt.read_logs(h, 1, limit=1).next_cursor == 2
    rt.stop(h)
    rt.stop(h, force=True)
    assert rt.stops == [("job-1-training", False), ("job-1-training", True)]
    assert rt.status(h).phase == "running"  # the test decides when it exits
    rt.set_state("job-1-training", ContainerState("exited", exit_code=0))
    assert rt.status(h).exit_code == 0
    rt.remove(h)
    assert rt.removed == ["job-1-training"]


def test_exit_on_stop() -> None:
    rt = FakeRuntime(exit_on_stop=True)
    h = rt.launch(plan())
    rt.stop(h)
    assert (rt.status(h).phase, rt.status(h).exit_code) == ("exited", 143)
    h2 = rt.launch(plan("other"))
    rt.stop(h2, force=True)
    assert rt.status(h2).exit_code == 137


def test_launch_failures_by_image() -> None:
    rt = FakeRuntime()
    rt.fail_launch("bad:1", "no such image bad:1")
    rt.fail_images.add("worse:2")
    with pytest.raises(RuntimeBackendError, match="no such image bad:1"):
        rt.launch(plan(image="bad:1"))
    with pytest.raises(RuntimeBackendError, match="worse:2"):
        rt.launch(RulePlan("r", "job-1", "R", "worse:2", {}, "s3://b/t", "s3://b/r"))
    assert rt.launched == []


def test_unknown_handles_are_missing() -> None:
    rt = FakeRuntime()
    other = FakeRuntime().launch(plan())
    assert rt.status(other).phase == "missing"
    with pytest.raises(KeyError):
        rt.set_state("nope", ContainerState("exited"))


def test_lists_what_exists_by_job_until_removed() -> None:
    rt = FakeRuntime()
    h = rt.launch(plan())
    rt.launch(replace(plan("other-training"), job_name="other"))
    found = rt.list_containers("job-1")
    assert [(c.container_name, c.job_name, c.role, c.phase, c.live, c.handle) for c in found] == [
        ("job-1-training", "job-1", "training", "running", True, h)]
    assert sorted(c.job_name for c in rt.list_containers()) == ["job-1", "other"]
    rt.set_state("job-1-training", ContainerState("exited", exit_code=0))
    assert [(c.phase, c.live) for c in rt.list_containers("job-1")] == [("exited", False)]
    rt.remove(h)
    assert rt.list_containers("job-1") == []


def test_during_launch_runs_after_the_container_exists() -> None:
    rt = FakeRuntime()

    def boom(p: object) -> None:
        raise RuntimeBackendError("engine error after create")

    rt.during_launch = boom
    with pytest.raises(RuntimeBackendError):
        rt.launch(plan())
    assert [c.container_name for c in rt.list_containers()] == ["job-1-training"]  # left behind, as an engine may
