"""Multi-instance jobs in the supervisor (issue 17 §1), driven step by step with the fake
runtime: every host launched and recorded, one host's failure fails the job with its reason and
stops the others, a stop or a finding stops every host, per-host log streams, the host cap, and
records written before multi-instance jobs still load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_supervisor import Harness, request

from murphy.exceptions import ValidationException
from murphy.jobs.model import JobRecord
from murphy.jobs.plans import recorded, training_containers, training_plans
from murphy.runtimes.base import ContainerState, TrainingPlan

HOSTS = ["job-1-training", "job-1-training-2", "job-1-training-3"]


def multi(h: Harness, count: int = 3, **extra: Any) -> None:
    body = request(**extra)
    body["ResourceConfig"]["InstanceCount"] = count
    h.service.create_training_job(body, account="123456789012", region="us-west-2")


def host(h: Harness, i: int, **state: Any) -> None:
    h.runtime.set_state(HOSTS[i - 1], ContainerState(**state))


def test_every_host_is_launched_algo_1_first_and_recorded(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    multi(h)
    h.tick()
    plans = [p for p in h.runtime.launched if isinstance(p, TrainingPlan)]
    assert [p.container_name for p in plans] == HOSTS
    assert [p.current_host for p in plans] == ["algo-1", "algo-2", "algo-3"]
    assert all(p.hosts == ("algo-1", "algo-2", "algo-3") and p.first_host_container == HOSTS[0] for p in plans)
    assert [p.host_index for p in plans] == [1, 2, 3]
    rec = h.store.get("job-1")
    assert len(rec.training_handles()) == 3 and len(rec.extra_training) == 2
    assert [recorded(rec, n) for n in HOSTS] == rec.training_handles()
    assert h.tick()["TrainingJobStatus"] == "InProgress"


def test_a_failing_host_fails_the_job_with_its_reason_and_stops_the_others(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    multi(h)
    h.tick()
    host(h, 2, phase="exited", exit_code=3, failure="RuntimeError: rank 1 gave up")
    h.tick()
    assert sorted(h.runtime.stops) == [(HOSTS[0], False), (HOSTS[2], False)]  # SIGTERM to its peers
    h.runtime.stops.clear()
    job = h.service.describe_training_job("job-1")
    assert job["TrainingJobStatus"] == "InProgress" and "FailureReason" not in job  # not over while a host runs
    h.result("Rule0", "IssuesFound", step=3, message="ExplodingTensor: NaN")  # too late: it failed on its own
    h.clock.now += 6  # past the grace: SIGKILL
    h.tick()
    assert (HOSTS[0], True) in h.runtime.stops and (HOSTS[2], True) in h.runtime.stops
    assert h.store.get("job-1").secondary.value != "Stopping"  # the finding did not turn it into a stop
    host(h, 1, phase="exited", exit_code=137)
    host(h, 3, phase="exited", exit_code=137)
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Failed", "Failed")
    assert job["FailureReason"] == "RuntimeError: rank 1 gave up (algo-2)"


def test_a_reasoned_failure_wins_over_a_peer_that_broke_with_it(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    multi(h, count=2, rules=0)
    h.tick()
    host(h, 1, phase="exited", exit_code=1, ended_at=1.0)  # its collective broke: no failure file
    host(h, 2, phase="exited", exit_code=3, ended_at=2.0, failure="ValueError: bad batch")
    job = h.tick()
    assert job["TrainingJobStatus"] == "Failed" and job["FailureReason"] == "ValueError: bad batch (algo-2)"


def test_a_stop_signals_every_host_and_waits_for_all(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    multi(h, rules=0)
    h.tick()
    h.service.stop_training_job("job-1")
    h.tick()
    assert sorted(h.runtime.stops) == [(n, False) for n in HOSTS]
    for i in (1, 2):
        host(h, i, phase="exited", exit_code=143)
    assert h.tick()["TrainingJobStatus"] == "Stopping"  # algo-3 still runs
    host(h, 3, phase="exited", exit_code=143)
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert "FailureReason" not in job


def test_a_finding_stops_every_host(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    multi(h, count=2)
    h.tick()
    h.result("Rule0", "IssuesFound", step=4, message="ExplodingTensor: NaN on worker_1")
    h.tick()
    h.tick()
    assert sorted(n for n, force in h.runtime.stops if not force and n in HOSTS) == HOSTS[:2]


def test_all_hosts_exiting_0_complete_the_job_and_the_end_marker_is_murphys(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    multi(h, count=2, rules=0)
    h.tick()
    host(h, 1, phase="exited", exit_code=0)
    assert h.tick()["TrainingJobStatus"] == "InProgress"
    host(h, 2, phase="exited", exit_code=0)
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Completed", "Completed")
    from murphy.jobs.plans import open_uri, tensor_uri

    uri = tensor_uri(h.store.get("job-1"))
    assert uri is not None and open_uri(h.settings, uri).exists("training_job_end.ts")


def test_log_streams_are_per_host_and_the_job_is_described_once(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    multi(h, count=2, rules=0)
    h.tick()
    h.runtime.add_log(HOSTS[1], "hello from algo-2")
    streams = [s.name for s in h.service.log_streams("/aws/sagemaker/TrainingJobs", "job-1/")]
    assert [s.rsplit("-", 1)[0] for s in streams] == ["job-1/algo-1", "job-1/algo-2"]
    page = h.service.get_log_events("/aws/sagemaker/TrainingJobs", streams[1])
    assert [e.message for e in page.events] == ["hello from algo-2"]
    assert h.service.describe_training_job("job-1")["ResourceConfig"]["InstanceCount"] == 2


def test_more_hosts_than_the_cap_is_a_validation_error(tmp_path: Path) -> None:
    h = Harness(tmp_path, max_instances_fake=2)
    with pytest.raises(ValidationException, match=r"InstanceCount 3 exceeds the limit of 2 hosts per job on murphy's "
                                                  r"fake runtime.*MURPHY_MAX_INSTANCES_FAKE"):
        multi(h, count=3)
    assert list(h.store.active()) == []  # nothing was created


def test_caps_per_runtime_default_and_configured() -> None:
    from murphy.settings import Settings

    s = Settings()
    assert (s.max_instances("process"), s.max_instances("docker")) == (4, 8)
    assert Settings(max_instances_docker=16).max_instances("docker") == 16
    assert (s.max_instances("kubernetes"), s.max_instances_variable("kubernetes")) == (64, "MURPHY_MAX_INSTANCES_KUBERNETES")
    # A runtime without a cap of its own has the process runtime's, and says which variable that is.
    custom = Settings(max_instances_process=3)
    assert (custom.max_instances("other"), custom.max_instances_variable("other")) == (3, "MURPHY_MAX_INSTANCES_PROCESS")
    with pytest.raises(ValueError):
        Settings(max_instances_process=0)


def test_a_record_written_before_multi_instance_jobs_still_loads(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    multi(h, count=1, rules=0)
    h.tick()
    d = h.store.get("job-1").to_dict()
    d.pop("extra_training")
    old = JobRecord.from_dict(d)
    assert old.extra_training == [] and len(old.training_handles()) == 1
    assert training_containers(old) == ["job-1-training"]
    assert [p.container_name for p in training_plans(old)] == ["job-1-training"]
    again = JobRecord.from_dict(h.store.get("job-1").to_dict())
    assert again.training_handles() == old.training_handles()


def test_a_host_that_cannot_start_fails_the_job_and_its_started_peers_go(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    multi(h, rules=0)

    def refuse(plan: Any) -> None:
        if getattr(plan, "current_host", "") == "algo-2":
            raise ValidationException("no room for it")

    h.runtime.during_launch = refuse
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Failed", "Failed")
    assert job["FailureReason"].endswith("(algo-2)") and "no room for it" in job["FailureReason"]
    assert (HOSTS[0], True) in h.runtime.stops and HOSTS[0] in h.runtime.removed
    assert [c.container_name for c in h.runtime.list_containers("job-1") if c.live] == []


def test_the_reconciler_holds_every_host_against_the_record(tmp_path: Path) -> None:
    from murphy.jobs.reconciler import Reconciler

    h = Harness(tmp_path)
    multi(h, rules=0)
    h.tick()
    assert Reconciler(h.store, h.runtime).sweep() == []  # every host is on the record
    rec = h.store.get("job-1")
    rec.extra_training[0].id = "another-container"  # algo-2's slot names another container
    h.store.update(rec)
    swept = Reconciler(h.store, h.runtime).sweep()
    assert [s.container_name for s in swept] == [HOSTS[1]]
    assert "records container another-container" in swept[0].reason


def test_a_stopping_job_that_never_recorded_its_hosts_has_them_all_killed(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    multi(h, rules=0)
    h.tick()
    h.service.stop_training_job("job-1")
    rec = h.store.get("job-1")
    rec.training, rec.extra_training = None, []  # as if a crash came before the handles were written
    h.store.update(rec)
    h.tick()
    assert sorted(n for n, force in h.runtime.stops if force) == HOSTS
    assert [c for c in h.runtime.list_containers("job-1") if c.live] == []
    assert h.tick()["TrainingJobStatus"] == "Stopped"


def polled(h: Harness, i: int) -> int:
    return h.runtime.status_calls.count(HOSTS[i - 1])


def test_a_host_that_ended_is_not_polled_again(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    multi(h, rules=0)
    h.tick()
    host(h, 1, phase="running", stage="Training")
    host(h, 3, phase="running", stage="Training")
    # algo-1 ends first: the job's SecondaryStatus still follows its last stage.
    host(h, 1, phase="exited", exit_code=0, stage="Uploading")
    host(h, 2, phase="exited", exit_code=0, stage="Uploading")
    assert h.tick()["SecondaryStatus"] == "Uploading"
    h.runtime.status_calls.clear()
    for _ in range(3):
        job = h.tick()
        assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("InProgress", "Uploading")
    assert (polled(h, 1), polled(h, 2)) == (0, 0) and polled(h, 3) == 3
    host(h, 3, phase="exited", exit_code=0)
    job = h.tick()
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Completed", "Completed")
    assert h.store.get("job-1").notes["training_exit"]["exit_code"] == 0  # algo-1's, remembered


def test_a_failed_host_is_not_polled_while_its_peers_are_stopped(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    multi(h, rules=0)
    h.tick()
    host(h, 2, phase="exited", exit_code=3, failure="RuntimeError: rank 1 gave up")
    h.tick()
    h.runtime.status_calls.clear()
    h.clock.now += 6  # past the grace: SIGKILL to its peers
    h.tick()
    assert (HOSTS[0], True) in h.runtime.stops and (HOSTS[2], True) in h.runtime.stops
    host(h, 1, phase="exited", exit_code=137)
    host(h, 3, phase="exited", exit_code=137)
    job = h.tick()
    assert polled(h, 2) == 0 and (polled(h, 1), polled(h, 3)) == (2, 2)
    assert (job["TrainingJobStatus"], job["FailureReason"]) == ("Failed", "RuntimeError: rank 1 gave up (algo-2)")
    assert h.store.get("job-1").notes["training_exit"]["exit_code"] == 3


def test_a_relaunched_host_is_polled_again(tmp_path: Path) -> None:
    # What is remembered belongs to the container it was seen on: another in the slot is asked.
    h = Harness(tmp_path)
    multi(h, count=2, rules=0)
    h.tick()
    host(h, 2, phase="exited", exit_code=0)
    h.tick()
    rec = h.store.get("job-1")
    assert rec.extra_training[0] is not None
    rec.extra_training[0].id = "another-container"
    h.store.update(rec)
    h.runtime.status_calls.clear()
    h.tick()
    assert h.runtime.status_calls.count("another-container") == 1
