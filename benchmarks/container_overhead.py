"""What real containers cost: the Docker runtime against the process runtime, same jobs, one run.

For each runtime a ``murphy server`` is started (local buckets, SQLite) and driven with the stock
boto3 client:

1. create → running: ``CreateTrainingJob`` sent → the training script's first line runs (it
   prints ``time.time()`` before importing anything; read back through GetLogEvents; containers
   share the host's clock). Target for Docker: p95 ≤ 2 s.
2. finding → stopped: a script writes one step every 50 ms, non-finite from step 20 on, and never
   ends by itself; an ExplodingTensor rule container watches it. From the rule's ``result.json``
   ``ended_at`` (the finding written) to the first DescribeTrainingJob (polled every 10 ms) that
   says ``Stopped``, which the supervisor writes only after the training container has exited.
   Target for Docker: p95 ≤ 3 s.

Needs a Docker engine and ``make images-cpu``. Ratios are Docker / process on the same machine.

usage: python benchmarks/container_overhead.py [--trials 10] [--runtimes process,docker]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import boto3

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import machine, table  # noqa: E402
from launch_latency import EXPLODES, free_port, pct, request, tarball  # noqa: E402

STARTED = """import time
print("started=" + repr(time.time()), flush=True)
"""
LOG_GROUP = "/aws/sagemaker/TrainingJobs"


class Plane:
    def __init__(self, runtime: str, root: Path) -> None:
        self.runtime = runtime
        self.root = root
        port = free_port()
        self.log = open(root / "server.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "murphy.cli", "server", "--port", str(port), "--data-dir", str(root / "data"),
             "--runtime", runtime, "--log-level", "warning"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.endpoint = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{self.endpoint}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        kw: dict[str, Any] = {"endpoint_url": self.endpoint, "region_name": "us-west-2",
                              "aws_access_key_id": "bench", "aws_secret_access_key": "bench"}
        self.sm = boto3.client("sagemaker", **kw)
        self.logs = boto3.client("logs", **kw)
        self.bucket = root / "data" / "buckets" / "bench"
        (self.bucket / "src").mkdir(parents=True)
        (self.bucket / "src" / "started.tar.gz").write_bytes(tarball(root / "src-started", {"train.py": STARTED}))
        (self.bucket / "src" / "explodes.tar.gz").write_bytes(tarball(
            root / "src-explodes", {"train.py": EXPLODES, "_rules_data.py": (HERE / "_rules_data.py").read_text()}))

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        sys.path.insert(0, str(HERE.parent / "tests"))
        from murphy_server import kill_job_containers

        kill_job_containers(self.root / "data")

    def log_line(self, name: str, prefix: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            streams = self.logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=f"{name}/")["logStreams"]
            if streams:
                events = self.logs.get_log_events(logGroupName=LOG_GROUP, logStreamName=streams[0]["logStreamName"],
                                                  startFromHead=True)["events"]
                for e in events:
                    if e["message"].startswith(prefix):
                        return str(e["message"])
            time.sleep(0.01)
        raise SystemExit(f"{name}: no {prefix!r} line in {timeout} s\n{(self.root / 'server.log').read_text()[-2000:]}")

    def wait_terminal(self, name: str, poll: float = 0.05) -> tuple[dict[str, Any], float]:
        while True:
            job = self.sm.describe_training_job(TrainingJobName=name)
            if job["TrainingJobStatus"] in ("Stopped", "Completed", "Failed"):
                return job, time.time()
            time.sleep(poll)


def measure(runtime: str, trials: int) -> tuple[list[float], list[float]]:
    root = Path(tempfile.mkdtemp(prefix=f"murphy-overhead-{runtime}-"))
    plane = Plane(runtime, root)
    launch: list[float] = []
    stop: list[float] = []
    try:
        for i in range(trials):
            name = f"launch-{i}"
            t0 = time.time()
            plane.sm.create_training_job(**request(name, "s3://bench/src/started.tar.gz", {}, rule=False))
            started = float(plane.log_line(name, "started=").split("=", 1)[1])
            launch.append(started - t0)
            job, _ = plane.wait_terminal(name)
            if job["TrainingJobStatus"] != "Completed":
                raise SystemExit(f"{name} ended {job['TrainingJobStatus']}: {job.get('FailureReason')}")
        for i in range(trials):
            name = f"finding-{i}"
            plane.sm.create_training_job(**request(name, "s3://bench/src/explodes.tar.gz", {}, rule=True))
            job, seen = plane.wait_terminal(name, poll=0.01)
            if job["TrainingJobStatus"] != "Stopped":
                raise SystemExit(f"{name} ended {job['TrainingJobStatus']}: {job.get('FailureReason')}")
            result = json.loads((plane.bucket / "debug" / name / "rule-output" / "ExplodingTensor" / "result.json").read_text())
            found = dt.datetime.fromisoformat(result["ended_at"].replace("Z", "+00:00")).timestamp()
            stop.append(seen - found)
    finally:
        plane.close()
    return launch, stop


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--runtimes", default="process,docker")
    args = ap.parse_args()
    runtimes = args.runtimes.split(",")
    results = {rt: measure(rt, args.trials) for rt in runtimes}
    print(f"container_overhead — {machine()}, {args.trials} launches and {args.trials} stops per runtime")
    rows = []
    for index, (label, target) in enumerate((("create -> training script running", 2.0),
                                             ("finding written -> Describe says Stopped", 3.0))):
        row = [label]
        for rt in runtimes:
            values = results[rt][index]
            row += [f"{pct(values, 50) * 1000:.0f} ms", f"{pct(values, 95) * 1000:.0f} ms"]
        if "docker" in runtimes and "process" in runtimes:
            d, p = results["docker"][index], results["process"][index]
            row.append(f"{pct(d, 95) / pct(p, 95):.1f}x")
        if "docker" in runtimes:
            p95 = pct(results["docker"][index], 95)
            row += [f"<= {target * 1000:.0f} ms", "PASS" if p95 <= target else "MISS"]
        rows.append(row)
    header = ["path"]
    for rt in runtimes:
        header += [f"{rt} p50", f"{rt} p95"]
    if "docker" in runtimes and "process" in runtimes:
        header.append("docker/process p95")
    if "docker" in runtimes:
        header += ["docker target (p95)", ""]
    print(table(header, rows))


if __name__ == "__main__":
    main()
