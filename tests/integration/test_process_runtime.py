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
from runtime_support import TRAIN_PY, ProcessEnv, script_plan, tarball

import servers
from murphy.exceptions import RuntimeBackendError
from murphy.runtimes.base import Channel
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
