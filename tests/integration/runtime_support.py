"""What the process and Docker runtime tests share: the images, a training script, a tarball, and
one adapter per runtime (:class:`ProcessEnv`, :class:`DockerEnv`) that says where the two
legitimately differ, so the shared tests (test_runtimes_common.py) hold no runtime branches.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from murphy.runtimes import procfs
from murphy.runtimes.base import (
    ContainerState,
    Handle,
    Plan,
    RulePlan,
    Runtime,
    ScopedCredentials,
    TrainingPlan,
)
from murphy.runtimes.catalog import ImageCatalog
from murphy.sdk.estimator import source_tarball

DEMO = "murphy/linear-regression-demo:latest"
PYTORCH = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1.0-cpu-py310"
RULES = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"

TRAIN_PY = r'''
import argparse, json, os, signal, sys, time
p = argparse.ArgumentParser()
p.add_argument("--mode")
p.add_argument("--epochs", type=int)
args = p.parse_args()
print("argv " + json.dumps(sys.argv[1:]), flush=True)
if args.mode == "ok":
    train = os.environ["SM_CHANNEL_TRAIN"]
    files = sorted(os.path.relpath(os.path.join(d, f), train) for d, _, fs in os.walk(train) for f in fs)
    seen = {"files": files, "one": os.listdir(os.environ["SM_CHANNEL_ONE"]), "cwd": os.getcwd(),
            "job": os.environ["TRAINING_JOB_NAME"], "epochs": os.environ["SM_HP_EPOCHS"],
            "hook": os.environ.get("SMDEBUG_CONFIG_FILE_PATH")}
    open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "seen.json"), "w").write(json.dumps(seen))
    open(os.path.join(os.environ["SM_MODEL_DIR"], "model.bin"), "wb").write(b"weights")
elif args.mode == "fail":
    open("/".join([os.environ["SM_OUTPUT_DIR"], "failure"]), "w").write("ValueError: learning rate too high")
    sys.exit(3)
elif args.mode == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(60)
elif args.mode == "sleep":
    print("ready", flush=True)
    time.sleep(float(os.environ.get("SLEEP_S", "30")))
    print("done", flush=True)
elif args.mode == "probe":
    import socket
    facts = {"uid": os.getuid(), "gid": os.getgid(), "nets": sorted(os.listdir("/sys/class/net")), "cwd": os.getcwd(),
             "hook": os.environ.get("SMDEBUG_CONFIG_FILE_PATH"), "cpus": os.environ.get("SM_NUM_CPUS")}
    for line in open("/proc/self/status"):
        if line.startswith(("CapEff", "NoNewPrivs")):
            k, v = line.split(":", 1)
            facts[k] = v.strip()
    try:
        open("/etc/murphy-probe", "w").write("x")
        facts["root_writable"] = True
    except OSError:
        facts["root_writable"] = False
    try:
        socket.create_connection(("1.1.1.1", 80), timeout=2).close()
        facts["internet"] = True
    except OSError:
        facts["internet"] = False
    open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "probe.json"), "w").write(json.dumps(facts))
elif args.mode == "oom":
    print("ready", flush=True)
    hog = []
    while True:
        hog.append(bytearray(64 << 20))
'''


def script_plan(name: str, mode: str, **extra: Any) -> TrainingPlan:
    """A script-mode plan running TRAIN_PY in ``mode`` from the ``b`` bucket."""
    fields: dict[str, Any] = {
        "container_name": name, "job_name": name, "image": PYTORCH, "environment": {},
        "hyperparameters": {"sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://b/src/sourcedir.tar.gz"',
                            "mode": json.dumps(mode), "epochs": "2"},
        "instance_type": "ml.m5.xlarge", "instance_count": 1, "output_uri": f"s3://b/out/{name}/output",
    }
    fields.update(extra)
    return TrainingPlan(**fields)


def tarball(files: dict[str, str]) -> bytes:
    """``sourcedir.tar.gz`` of ``files`` (name -> text), packed by the SDK as a user's source is."""
    with tempfile.TemporaryDirectory() as src:
        for name, text in files.items():
            (Path(src) / name).write_text(text)
        return source_tarball(str(Path(src) / next(iter(files))), src)


class FakeCredentials:
    """:class:`~murphy.runtimes.base.JobCredentials` that only records what a runtime issues and
    revokes (no gateway listens); ``env`` is what each container gets besides its key."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.env = dict(env or {})
        self.issued: list[str] = []
        self.revoked: list[str] = []

    def issue(self, plan: Plan, endpoint_url: str | None) -> ScopedCredentials:
        key = f"ASIAFAKE{len(self.issued):08d}"
        self.issued.append(key)
        return ScopedCredentials(key, {**self.env, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": "s",
                                       "AWS_SESSION_TOKEN": "t"})

    def revoke(self, access_key_id: str) -> None:
        self.revoked.append(access_key_id)

    def listen_unix(self, socket_path: str) -> None:
        pass

    def listen_tcp(self, host: str = "127.0.0.1", port: int = 0) -> str:
        return f"http://{host}:{port or 1}"

    def close(self) -> None:
        pass

    def live(self) -> set[str]:
        """Keys issued and not revoked."""
        return set(self.issued) - set(self.revoked)


class RuntimeEnv:
    """A runtime under test with local buckets holding a script-mode source and two channels;
    subclasses say which runtime (``runtime``), how to clean up (``close``) and what differs."""

    #: Fields every script-mode plan of this runtime gets (unless the test sets them).
    plan_defaults: ClassVar[dict[str, Any]] = {}
    #: ``(phase, exit_code)`` of a container after ``remove``.
    after_remove: ClassVar[tuple[str, int | None]]
    #: Seconds the runtime may take to see a vanished container (0: at the first look).
    vanish_noticed_within: ClassVar[float]
    #: What still runs of a container right after :meth:`vanish` (see :meth:`leftovers`).
    survivors_of_vanish: ClassVar[list[str]]
    #: The phase of a vanished container once ``stop(force=True)`` has run.
    phase_after_stopping_vanished: ClassVar[str]

    def __init__(self, root: Path) -> None:
        self.buckets = root / "buckets"
        self.root = root / "containers"
        for key, text in {"src/sourcedir.tar.gz": None, "data/train/a.csv": "1,2\n", "data/train/sub/b.csv": "3,4\n",
                          "data/one.csv": "5,6\n"}.items():
            path = self.buckets / "b" / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(tarball({"train.py": TRAIN_PY}) if text is None else text.encode())
        self.rt = self.runtime()
        self.handles: list[Handle] = []

    def runtime(self, **options: Any) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def opt_ml(self, h: Handle) -> str:
        """Where the container's program sees SageMaker's /opt/ml."""
        raise NotImplementedError

    def in_opt_ml(self, h: Handle, *parts: str) -> str:
        return str(PurePosixPath(self.opt_ml(h), *parts))

    def check_container(self, h: Handle, image: str, job: str) -> None:
        """Assert that the container runs ``image`` for ``job``, where the runtime records that."""
        raise NotImplementedError

    def leftovers(self, h: Handle) -> list[str]:
        """What of the container still runs, by role, sorted."""
        raise NotImplementedError

    def vanish(self, h: Handle) -> None:
        """Make the container disappear behind the runtime's back, and wait until it has."""
        raise NotImplementedError

    def gone(self, h: Handle, timeout: float = 5) -> bool:
        """Nothing of the container runs any more, within ``timeout`` (exit is asynchronous)."""
        deadline = time.monotonic() + timeout
        while self.leftovers(h) and time.monotonic() < deadline:
            time.sleep(0.02)
        return not self.leftovers(h)

    def script_plan(self, name: str, mode: str, **extra: Any) -> TrainingPlan:
        return script_plan(name, mode, **{**self.plan_defaults, **extra})

    def bucket(self, key: str) -> Path:
        return self.buckets / "b" / key

    def launch(self, plan: TrainingPlan | RulePlan, rt: Runtime | None = None) -> Handle:
        h = (rt or self.rt).launch(plan)
        self.handles.append(h)
        return h

    def wait(self, h: Handle, timeout: float = 120, rt: Runtime | None = None) -> ContainerState:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = (rt or self.rt).status(h)
            if st.phase not in ("running", "pending"):
                return st
            time.sleep(0.05)
        raise AssertionError(f"{h.data['container_name']} still running after {timeout}s")

    def wait_log(self, h: Handle, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(e.message == text for e in self.rt.read_logs(h).events):
                return
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never logged by {h.data['container_name']}")


class ProcessEnv(RuntimeEnv):
    """The process runtime: a container is a session (shim and toolkit in one process group, the
    program in its own) with /opt/ml in a host directory."""

    after_remove = ("exited", 0)  # exit.json and the log stay on disk
    vanish_noticed_within = 5.0  # SIGKILL takes effect asynchronously
    survivors_of_vanish = ["program"]  # killing the container's group leaves the program's group
    phase_after_stopping_vanished = "exited"  # stop records the end the shim could not

    def runtime(self, **options: Any) -> Any:
        from murphy.runtimes.process import ProcessRuntime

        return ProcessRuntime(self.root, ImageCatalog(), {"MURPHY_S3_LOCAL_ROOT": str(self.buckets)})

    def close(self) -> None:
        for h in self.handles:
            self.rt.stop(h, force=True)

    def opt_ml(self, h: Handle) -> str:
        return str(h.data["opt_ml"])

    def check_container(self, h: Handle, image: str, job: str) -> None:
        pass  # a process has no image or labels; the catalog entry only chose its argv

    @staticmethod
    def members(h: Handle) -> list[procfs.ProcStat]:
        return procfs.session_members(h.data["pgid"], h.data["start_time"], f"MURPHY_CONTAINER={h.data['dir']}")

    def leftovers(self, h: Handle) -> list[str]:
        def role(m: procfs.ProcStat) -> str:
            if m.pgid != h.data["pgid"]:
                return "program"
            return "shim" if m.pid == h.data["pid"] else "toolkit"
        return sorted(role(m) for m in self.members(h))

    def vanish(self, h: Handle) -> None:
        os.killpg(h.data["pgid"], signal.SIGKILL)  # the shim and the toolkit; the program lives on
        deadline = time.monotonic() + 5
        while any(m.pgid == h.data["pgid"] for m in self.members(h)) and time.monotonic() < deadline:
            time.sleep(0.02)


class DockerEnv(RuntimeEnv):
    """The Docker runtime: a container of the engine, /opt/ml bind-mounted from the host."""

    plan_defaults: ClassVar[dict[str, Any]] = {"account": "111122223333", "region": "us-west-2"}  # labels
    after_remove = ("missing", None)  # the engine forgets the container; its copied log stays
    vanish_noticed_within = 0.0  # removal is synchronous
    survivors_of_vanish: ClassVar[list[str]] = []
    phase_after_stopping_vanished = "missing"

    def __init__(self, root: Path, client: Any) -> None:
        self.client = client
        super().__init__(root)

    def runtime(self, **options: Any) -> Any:
        # The Docker SDK is an optional dependency: only Docker tests import it.
        from murphy.runtimes.docker import DockerRuntime
        from murphy.runtimes.docker_spec import DockerOptions, StoreAccess

        opts = DockerOptions(**options) if options else None
        return DockerRuntime(self.root, ImageCatalog(), StoreAccess(buckets_dir=str(self.buckets)), options=opts)

    def close(self) -> None:
        for h in self.handles:
            self.rt.remove(h)
        self.rt.close()

    def opt_ml(self, h: Handle) -> str:
        return "/opt/ml"  # the container's path, not the host's

    def check_container(self, h: Handle, image: str, job: str) -> None:
        config = self.client.api.inspect_container(h.id)["Config"]
        assert config["Image"] == image
        assert config["Labels"]["io.murphy.job"] == job

    def leftovers(self, h: Handle) -> list[str]:
        import docker.errors

        try:
            running = self.client.api.inspect_container(h.id)["State"]["Running"]
        except docker.errors.NotFound:
            return []
        return ["container"] if running else []

    def vanish(self, h: Handle) -> None:
        self.client.api.remove_container(h.id, force=True)  # returns once it is gone
