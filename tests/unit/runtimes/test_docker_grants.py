"""The Docker runtime with local buckets mounts a container's grants only: what it reads
read-only, what it writes read-write (made first), nothing of other jobs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes.base import Channel, RulePlan, TrainingPlan
from murphy.runtimes.docker_grants import bucket_mounts, grant_ownership

B = "/murphy/buckets"


def training(job: str = "a", channels: tuple[Channel, ...] = ()) -> TrainingPlan:
    return TrainingPlan(
        container_name=f"{job}-training", job_name=job, image="img", hyperparameters={
            "sagemaker_submit_directory": json.dumps(f"s3://b/src/{job}/sourcedir.tar.gz")},
        environment={}, instance_type="ml.m5.large", instance_count=1, channels=channels,
        tensor_uri=f"s3://b/out/{job}/debug-output", output_uri=f"s3://b/out/{job}/output",
        checkpoint_uri=f"s3://b/ckpt/{job}", tensorboard_uri=f"s3://b/tb/{job}/tensorboard-output")


def test_a_training_container_gets_its_inputs_read_only_and_its_outputs_read_write(tmp_path: Path) -> None:
    root = tmp_path / "buckets"
    (root / "b" / "data" / "train").mkdir(parents=True)
    (root / "b" / "data" / "one.csv").write_text("1\n")
    (root / "b" / "src" / "a").mkdir(parents=True)
    (root / "b" / "src" / "a" / "sourcedir.tar.gz").write_bytes(b"tgz")
    (root / "b" / "out" / "other" / "debug-output").mkdir(parents=True)  # another job's tensors
    chans = (Channel("train", "s3://b/data/train"), Channel("one", "s3://b/data/one.csv"),
             Channel("gone", "s3://b/data/missing"))
    got = bucket_mounts(training("a", chans), root)
    r = str(root.resolve())
    assert got == {
        f"{r}/b/out/a/output": {"bind": f"{B}/b/out/a/output", "mode": "rw"},
        f"{r}/b/out/a/debug-output": {"bind": f"{B}/b/out/a/debug-output", "mode": "rw"},
        f"{r}/b/tb/a/tensorboard-output": {"bind": f"{B}/b/tb/a/tensorboard-output", "mode": "rw"},
        f"{r}/b/ckpt/a": {"bind": f"{B}/b/ckpt/a", "mode": "rw"},
        f"{r}/b/src/a/sourcedir.tar.gz": {"bind": f"{B}/b/src/a/sourcedir.tar.gz", "mode": "ro"},
        f"{r}/b/data/train": {"bind": f"{B}/b/data/train", "mode": "ro"},
        f"{r}/b/data/one.csv": {"bind": f"{B}/b/data/one.csv", "mode": "ro"},
    }  # the missing channel is not mounted (its download says so); nothing of job "other"
    for host, m in got.items():
        if m["mode"] == "rw":
            assert Path(host).is_dir()  # made before the container starts (Docker would make them as root)
    assert not (root / "b" / "data" / "missing").exists()


def test_a_rule_reads_its_job_s_tensors_and_writes_its_own_results(tmp_path: Path) -> None:
    plan = RulePlan(container_name="a-rule-0", job_name="a", rule_name="Loss", image="r", rule_parameters={},
                    base_trial_uri="s3://b/out/a/debug-output", result_uri="s3://b/out/a/rule-output/Loss")
    r = str(tmp_path.resolve())
    assert bucket_mounts(plan, tmp_path) == {
        f"{r}/b/out/a/rule-output/Loss": {"bind": f"{B}/b/out/a/rule-output/Loss", "mode": "rw"},
        f"{r}/b/out/a/debug-output": {"bind": f"{B}/b/out/a/debug-output", "mode": "ro"},
    }
    # made even before its training container writes there: the rule sees the tensors as they come
    assert (tmp_path / "b" / "out" / "a" / "debug-output").is_dir()


def test_a_read_inside_a_write_prefix_and_a_manifest_s_prefix(tmp_path: Path) -> None:
    (tmp_path / "b" / "ckpt" / "a" / "warm").mkdir(parents=True)
    (tmp_path / "b" / "images").mkdir(parents=True)
    (tmp_path / "b" / "m.json").write_text(json.dumps([{"prefix": "s3://b/images/"}, "x.png"]))
    chans = (Channel("warm", "s3://b/ckpt/a/warm"), Channel("m", "s3://b/m.json", data_type="ManifestFile"))
    got = bucket_mounts(training("a", chans), tmp_path)
    r = str(tmp_path.resolve())
    assert f"{r}/b/ckpt/a/warm" not in got and got[f"{r}/b/ckpt/a"]["mode"] == "rw"
    assert got[f"{r}/b/m.json"]["mode"] == "ro" and got[f"{r}/b/images"]["mode"] == "ro"


def test_a_symbolic_link_is_never_followed_out_of_the_buckets(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (tmp_path / "buckets" / "b" / "pub").mkdir(parents=True)
    os.symlink(secret, tmp_path / "buckets" / "b" / "pub" / "data")  # made by a job in a prefix it writes
    with pytest.raises(RuntimeBackendError, match="symbolic link"):
        bucket_mounts(training("a", (Channel("train", "s3://b/pub/data"),)), tmp_path / "buckets")
    (tmp_path / "buckets2" / "b").mkdir(parents=True)
    os.symlink(secret, tmp_path / "buckets2" / "b" / "out")  # a write prefix's parent
    with pytest.raises(RuntimeBackendError, match="symbolic link"):
        bucket_mounts(training("a"), tmp_path / "buckets2")
    assert list(secret.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root-run service hands directories to the images' user")
def test_the_container_s_user_gets_its_directories_and_write_prefixes_and_nothing_it_only_reads(tmp_path: Path) -> None:
    root = tmp_path / "buckets"
    (root / "b" / "data" / "train").mkdir(parents=True)
    cdir = tmp_path / "c"
    (cdir / "opt" / "ml" / "input").mkdir(parents=True)
    (cdir / "opt" / "ml" / "input" / "config.json").write_text("{}")
    (cdir / "run").mkdir()
    plan = training("a", (Channel("train", "s3://b/data/train"),))
    mounts = bucket_mounts(plan, root)
    grant_ownership(plan, cdir, "1000:1001", mounts)

    def owner(path: Path) -> tuple[int, int]:
        st = path.lstat()
        return st.st_uid, st.st_gid

    for path in (cdir / "opt", cdir / "opt" / "ml" / "input" / "config.json", cdir / "run"):
        assert owner(path) == (1000, 1001), path
    for prefix in ("out/a/output", "out/a/debug-output", "ckpt/a", "tb/a/tensorboard-output"):
        assert owner(root / "b" / prefix) == (1000, 1001), prefix
    # what it only reads, and the folders above its prefixes, stay the service's
    for path in (root / "b" / "data" / "train", root / "b", root / "b" / "out", root / "b" / "out" / "a"):
        assert owner(path) == (0, 0), path
