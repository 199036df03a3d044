"""What the process and Docker runtime tests share: the images, a training script, a tarball."""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path
from typing import Any

from murphy.jobs.model import Handle
from murphy.runtimes.base import ContainerState, RulePlan, Runtime, TrainingPlan

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


def tarball(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class RuntimeEnv:
    """A runtime under test with local buckets holding a script-mode source and two channels;
    subclasses say which runtime (``runtime``) and how to clean up (``close``)."""

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
