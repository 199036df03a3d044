"""Issue 14: a job that says Stopped has nothing left running, on the process and Docker runtimes.

A real ``murphy server`` and the stock boto3 client: CreateTrainingJob then StopTrainingJob after
0, 0.05, 0.1, 0.3 and 1 s, and 20 such pairs at once from several threads. Whether anything of
a job still runs is asked of the OS (``/proc``: every process whose environment names the job)
or of the engine (containers labelled with the job, or named after it), never of murphy's
records: at the moment DescribeTrainingJob first says Stopped, and again 10 s later. Then the
service is killed (SIGKILL, through the test-only ``MURPHY_TEST_CRASH_AFTER_LAUNCH``) between a
launch and the write of its handles, and restarted: a live job's containers are re-attached
(not launched twice), those of a job the store does not know are stopped by the reconciler.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from runtime_support import PYTORCH, RULES, TRAIN_PY, tarball

DELAYS = (0.0, 0.05, 0.1, 0.3, 1.0)
TERMINAL = {"Completed", "Failed", "Stopped"}
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
LIVE_STATES = {"created", "running", "restarting", "paused"}


def job_request(name: str, rules: int = 1) -> dict[str, Any]:
    """A script-mode job that sleeps two minutes (it never ends by itself within the test),
    with one rule evaluator waiting for its tensors."""
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": PYTORCH, "TrainingInputMode": "File"},
        "RoleArn": ROLE,
        "HyperParameters": {"sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://b/src/sourcedir.tar.gz"',
                            "mode": '"sleep"'},
        "Environment": {"SLEEP_S": "120"},
        "OutputDataConfig": {"S3OutputPath": "s3://b/out"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        "DebugHookConfig": {"S3OutputPath": "s3://b/debug", "CollectionConfigurations": []},
        "DebugRuleConfigurations": [
            {"RuleConfigurationName": f"ExplodingTensor{i}", "RuleEvaluatorImage": RULES,
             "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}} for i in range(rules)],
    }


class Engine:
    """What runs of a job, asked of the OS or the Docker engine."""

    def __init__(self, runtime: str, client: Any = None) -> None:
        self.runtime = runtime
        self.client = client

    def running(self, job: str) -> list[str]:
        return self._containers(job) if self.runtime == "docker" else self._processes(job)

    def ids(self, job: str) -> set[str]:
        """Which containers run of ``job``: their ids (Docker), or the session ids of its
        processes (each process container is one session, led by its shim)."""
        if self.runtime == "docker":
            return {entry.split(" ", 1)[0] for entry in self.running(job)}
        return {entry.split(" ")[1] for entry in self.running(job)}

    def _containers(self, job: str) -> list[str]:
        by_label = self.client.api.containers(all=True, filters={"label": f"io.murphy.job={job}"})
        by_name = [c for c in self.client.api.containers(all=True, filters={"name": f"-{job}-"})
                   if any(n.endswith((f"-{job}-training", *(f"-{job}-rule-{i}" for i in range(4)))) for n in c["Names"])]
        seen = {c["Id"]: c for c in by_label + by_name}
        return sorted(f"{c['Id']} {c['Names'][0]} {c['State']}" for c in seen.values() if c["State"] in LIVE_STATES)

    @staticmethod
    def _processes(job: str) -> list[str]:
        # The SageMaker contract's variables name the job in every training process (and the
        # rule evaluator's in every rule process), whatever murphy's own markers say.
        wanted = {f"TRAINING_JOB_NAME={job}".encode(), f"MURPHY_TRAINING_JOB_NAME={job}".encode(),
                  f"MURPHY_JOB_NAME={job}".encode()}
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                env = set(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))
                if not env & wanted:
                    continue
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:120].decode(errors="replace")
            except OSError:  # it ended meanwhile
                continue
            if fields[0] not in ("Z", "X"):
                out.append(f"{pid} sid={fields[3]} {cmdline}")
        return sorted(out)


RUNTIMES = [pytest.param("process"), pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture(params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def engine(request: pytest.FixtureRequest, runtime: str) -> Engine:
    return Engine(runtime, request.getfixturevalue("docker_engine") if runtime == "docker" else None)


def serve(make_server: Any, runtime: str, *args: str, env: dict[str, str] | None = None, data_dir: Path | None = None) -> Any:
    server = make_server("--runtime", runtime, *args, env=env, data_dir=data_dir)
    src = server.data_dir / "buckets" / "b" / "src" / "sourcedir.tar.gz"
    if not src.exists():
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_bytes(tarball({"train.py": TRAIN_PY}))
    return server


def create_and_stop(client: Any, name: str, delay: float) -> None:
    client.create_training_job(**job_request(name))
    if delay:
        time.sleep(delay)
    response = client.stop_training_job(TrainingJobName=name)  # whatever state the job is in
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    job = client.describe_training_job(TrainingJobName=name)
    assert job["TrainingJobStatus"] in ("Stopping", "Stopped"), job


def wait_stopped_and_check(client: Any, engine: Engine, names: list[str], timeout: float) -> None:
    """Describe every job until each is terminal; the moment one first says Stopped, nothing of
    it may run. Then, 10 s later, still nothing of any."""
    pending, deadline = set(names), time.monotonic() + timeout
    while pending:
        assert time.monotonic() < deadline, {n: client.describe_training_job(TrainingJobName=n)["SecondaryStatus"] for n in pending}
        for name in sorted(pending):
            job = client.describe_training_job(TrainingJobName=name)
            if job["TrainingJobStatus"] in TERMINAL:
                assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped"), job
                assert engine.running(name) == [], f"{name} says Stopped but this still runs"
                assert all(r["RuleEvaluationStatus"] in ("Stopped", "Error", "NoIssuesFound", "IssuesFound")
                           for r in job["DebugRuleEvaluationStatuses"]), job
                pending.discard(name)
        time.sleep(0.05)
    time.sleep(10)
    assert {n: engine.running(n) for n in names if engine.running(n)} == {}


@pytest.mark.slow
def test_stop_at_any_moment_after_create_leaves_nothing_running(make_server: Any, runtime: str, engine: Engine) -> None:
    client = serve(make_server, runtime).client()
    names = []
    for delay in DELAYS:
        name = f"stop-after-{int(delay * 1000)}ms"
        create_and_stop(client, name, delay)
        names.append(name)
    wait_stopped_and_check(client, engine, names, timeout=120)


@pytest.mark.slow
def test_twenty_create_stop_pairs_at_once_leave_nothing_running(make_server: Any, runtime: str, engine: Engine) -> None:
    server = serve(make_server, runtime)
    names = [f"pair-{i:02d}" for i in range(20)]
    delays = dict(zip(names, itertools.cycle(DELAYS), strict=False))
    errors: list[BaseException] = []

    def worker(mine: list[str]) -> None:
        client = server.client()  # boto3 clients are not shared across threads
        try:
            for name in mine:
                create_and_stop(client, name, delays[name])
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(names[i::5],)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    wait_stopped_and_check(server.client(), engine, names, timeout=240)


def wait_for(what: Any, timeout: float, message: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := what()):
        assert time.monotonic() < deadline, message
        time.sleep(0.1)
    return value


@pytest.mark.slow
def test_a_crash_between_launch_and_record_is_reattached_while_the_job_lives(make_server: Any, runtime: str,
                                                                              engine: Engine) -> None:
    server = serve(make_server, runtime, env={"MURPHY_TEST_CRASH_AFTER_LAUNCH": "1"})
    server.client().create_training_job(**job_request("crash-live"))
    assert server.proc.wait(60) == -9  # killed itself right after the launch, before recording it
    before = wait_for(lambda: engine.ids("crash-live") if len(engine.running("crash-live")) >= 2 else None, 30,
                      "the launch before the crash started nothing")
    restarted = serve(make_server, runtime, data_dir=server.data_dir)
    client = restarted.client()
    wait_for(lambda: client.describe_training_job(TrainingJobName="crash-live")["SecondaryStatus"] == "Training", 60,
             "the re-attached job never reached Training")
    assert engine.ids("crash-live") == before  # the same containers: re-attached, none launched twice
    assert "re-attaches it" in restarted.log()
    client.stop_training_job(TrainingJobName="crash-live")
    wait_stopped_and_check(client, engine, ["crash-live"], timeout=60)


@pytest.mark.slow
def test_a_crash_leaving_containers_of_a_job_no_store_knows_is_cleaned_up(make_server: Any, runtime: str,
                                                                          engine: Engine, tmp_path: Path) -> None:
    server = serve(make_server, runtime, env={"MURPHY_TEST_CRASH_AFTER_LAUNCH": "1"})
    server.client().create_training_job(**job_request("crash-orphan"))
    assert server.proc.wait(60) == -9
    wait_for(lambda: len(engine.running("crash-orphan")) >= 2, 30, "the launch before the crash started nothing")
    # The same installation (data directory, so the same runtime id) on a database that has
    # never heard of the job: what runs of it is nobody's.
    restarted = serve(make_server, runtime, "--database-url", f"sqlite:///{tmp_path / 'other.db'}", data_dir=server.data_dir)
    wait_for(lambda: engine.running("crash-orphan") == [], 30, "the reconciler left the orphans running")
    log = restarted.log()
    assert "reconciler: stopping container crash-orphan-training (job crash-orphan): no job 'crash-orphan' in the store" in log
    assert "reconciler: stopping container crash-orphan-rule-0 (job crash-orphan)" in log
    time.sleep(10)
    assert engine.running("crash-orphan") == []
