"""ProcessRuntime only: what has no Docker counterpart (unknown images, the toolkit killed by a
signal, script mode on a real S3 endpoint). The contract both runtimes keep is in
test_runtimes_common.py.

Buckets are local directories (``MURPHY_S3_LOCAL_ROOT``), as in the embedded default.
"""

from __future__ import annotations

import io
import json
import os
import signal
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from runtime_support import TRAIN_PY, FakeCredentials, ProcessEnv, script_plan, tarball

import servers
from murphy.exceptions import RuntimeBackendError
from murphy.runtimes.base import Channel, TrainingPlan
from murphy.runtimes.catalog import ImageCatalog
from murphy.runtimes.process import ProcessRuntime


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessEnv]:
    e = ProcessEnv(tmp_path_factory.mktemp("process-runtime"))
    yield e
    e.close()


def test_unknown_image_is_refused_before_anything_runs(env: ProcessEnv) -> None:
    plan = script_plan("unknown", "ok", image="acme/trainer:1", hyperparameters={"lr": "1"})
    with pytest.raises(RuntimeBackendError, match="acme/trainer:1"):
        env.rt.launch(plan)
    assert not (env.root / "unknown").exists()


def test_toolkit_killed_behind_the_runtimes_back_is_exited_by_signal(env: ProcessEnv) -> None:
    h = env.launch(script_plan("sm-kill9", "sleep"))
    env.wait_log(h, "ready")
    [toolkit] = [m.pid for m in env.members(h) if m.pgid == h.data["pgid"] and m.pid != h.data["pid"]]
    os.kill(toolkit, signal.SIGKILL)
    st = env.wait(h, timeout=10)
    assert (st.phase, st.exit_code) == ("exited", 128 + signal.SIGKILL)
    assert env.gone(h)  # the shim took the program down with the container


def test_a_launch_that_died_before_its_handle_is_found_in_proc_and_not_started_twice(env: ProcessEnv) -> None:
    h = env.launch(script_plan("sm-half", "sleep"))
    env.wait_log(h, "ready")
    cdir = Path(h.data["dir"])
    (cdir / "handle.json").unlink()  # as a service killed between the start and handle.json leaves it
    (cdir / "launch.json").write_text("{}")
    other = ProcessRuntime(env.root, ImageCatalog(), {})  # the restarted service's runtime
    [found] = other.list_containers("sm-half")
    assert (found.handle.id, found.handle.data["pid"], found.role) == (h.id, h.data["pid"], "training")
    again = other.launch(script_plan("sm-half", "sleep"))
    assert again.id == h.id and [m.pid for m in env.members(h) if m.pid == m.sid] == [h.data["pid"]]
    assert (cdir / "handle.json").exists()
    other.stop(again, force=True)
    assert env.gone(h) and other.list_containers("sm-half") == []


def test_every_process_of_a_container_carries_the_labels(env: ProcessEnv) -> None:
    h = env.launch(script_plan("sm-labels", "sleep"))
    env.wait_log(h, "ready")
    members = env.members(h)
    assert len(members) == 3  # shim, toolkit, program
    for m in members:
        environ = dict(e.split("=", 1) for e in Path(f"/proc/{m.pid}/environ").read_text().split("\0") if "=" in e)
        assert environ["MURPHY_RUNTIME_ID"] == env.rt.rid and environ["MURPHY_JOB_NAME"] == "sm-labels"
        assert environ["MURPHY_CONTAINER_ROLE"] == "training" and environ["MURPHY_CONTAINER"] == h.data["dir"]
    env.rt.stop(h, force=True)
    assert env.gone(h)


# ---- per-container S3 keys: every one issued is revoked -------------------------------------


def _keyed(env: ProcessEnv, creds: FakeCredentials) -> ProcessRuntime:
    """A runtime issuing per-container keys (as on an S3 endpoint); the fake's containers still
    read the local buckets, so they run."""
    return ProcessRuntime(env.root, ImageCatalog(), {}, credentials=creds)


def test_a_container_that_cannot_start_has_its_key_revoked(env: ProcessEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    creds = FakeCredentials({"MURPHY_S3_LOCAL_ROOT": str(env.buckets)})
    rt = _keyed(env, creds)

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    with pytest.raises(RuntimeBackendError, match="Too many open files"):
        rt.launch(script_plan("sm-no-popen", "sleep"))
    assert len(creds.issued) == 1 and creds.live() == set()


class _Died(BaseException):
    """The service dying mid-launch: nothing of murphy's may catch it."""


def _launch_dying_at_the_handle(rt: ProcessRuntime, plan: TrainingPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    """``rt.launch(plan)`` with the service dying once the process runs, before its handle.json."""
    import murphy.runtimes.process as process

    write = process._write_json

    def die_at_the_handle(path: str, doc: object) -> None:
        if path.endswith("handle.json"):
            raise _Died
        write(path, doc)

    with monkeypatch.context() as m:
        m.setattr(process, "_write_json", die_at_the_handle)
        with pytest.raises(_Died):
            rt.launch(plan)


def test_a_launch_that_died_before_its_handle_keeps_its_key_for_removal(env: ProcessEnv,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    creds = FakeCredentials({"MURPHY_S3_LOCAL_ROOT": str(env.buckets)})
    rt = _keyed(env, creds)
    _launch_dying_at_the_handle(rt, script_plan("sm-keyed-half", "sleep"), monkeypatch)
    [key] = creds.issued
    restarted = _keyed(env, creds)
    [found] = restarted.list_containers("sm-keyed-half")
    env.handles.append(found.handle)
    assert found.handle.data["s3_access_key_id"] == key
    again = restarted.launch(script_plan("sm-keyed-half", "sleep"))  # re-attaches, no second key
    assert again.id == found.handle.id and again.data["s3_access_key_id"] == key and creds.issued == [key]
    restarted.remove(again)
    assert creds.revoked == [key] and env.gone(again)


def test_relaunching_after_a_launch_whose_container_died_revokes_that_launch_s_key(
        env: ProcessEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    creds = FakeCredentials({"MURPHY_S3_LOCAL_ROOT": str(env.buckets)})
    rt = _keyed(env, creds)
    _launch_dying_at_the_handle(rt, script_plan("sm-keyed-dead", "ok"), monkeypatch)
    [first] = creds.issued
    deadline = time.monotonic() + 60
    while rt.list_containers("sm-keyed-dead") and time.monotonic() < deadline:  # it runs to its end
        time.sleep(0.05)
    assert rt.list_containers("sm-keyed-dead") == []
    h = env.launch(script_plan("sm-keyed-dead", "ok"), rt=_keyed(env, creds))
    assert creds.revoked == [first] and h.data["s3_access_key_id"] == creds.issued[1] != first


# ---- the same container contract on a real S3 endpoint ---------------------------------------


@pytest.mark.s3
def test_script_mode_on_a_real_s3_endpoint(tmp_path: Path, seaweedfs_server: servers.S3Server) -> None:
    bucket = servers.new_bucket(seaweedfs_server)
    s3 = seaweedfs_server.client()
    s3.put_object(Bucket=bucket, Key="src/sourcedir.tar.gz", Body=tarball({"train.py": TRAIN_PY}))
    s3.put_object(Bucket=bucket, Key="data/train/a.csv", Body=b"1\n")
    s3.put_object(Bucket=bucket, Key="data/train/sub/b.csv", Body=b"2\n")
    s3.put_object(Bucket=bucket, Key="data/one.csv", Body=b"3\n")
    rt = ProcessRuntime(tmp_path / "containers", ImageCatalog(), seaweedfs_server.env())
    plan = script_plan(
        "s3-ok", "ok", output_uri=f"s3://{bucket}/out/s3-ok/output", tensor_uri=f"s3://{bucket}/debug/s3-ok/debug-output",
        debug_hook_config={"S3OutputPath": f"s3://{bucket}/debug"},
        channels=(Channel("train", f"s3://{bucket}/data/train"), Channel("one", f"s3://{bucket}/data/one.csv")),
        hyperparameters={"sagemaker_program": '"train.py"', "mode": '"ok"', "epochs": "2",
                         "sagemaker_submit_directory": json.dumps(f"s3://{bucket}/src/sourcedir.tar.gz")},
    )
    h = rt.launch(plan)
    deadline = time.monotonic() + 60
    while (st := rt.status(h)).phase == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (st.phase, st.exit_code, st.failure) == ("exited", 0, None), st.log_tail
    body = s3.get_object(Bucket=bucket, Key="out/s3-ok/output/output.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        seen = json.loads(tar.extractfile("seen.json").read())  # type: ignore[union-attr]
    assert seen["files"] == ["a.csv", os.path.join("sub", "b.csv")] and seen["one"] == ["one.csv"]
    assert seen["hook"] == str(Path(h.data["opt_ml"]) / "input" / "config" / "debughookconfig.json")
    s3.head_object(Bucket=bucket, Key="debug/s3-ok/debug-output/training_job_end.ts")
    s3.head_object(Bucket=bucket, Key="out/s3-ok/output/model.tar.gz")
