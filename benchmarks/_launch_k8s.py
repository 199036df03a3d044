"""launch_latency.py's Kubernetes part: ``murphy server --runtime kubernetes`` against murphy's
fake API server (``murphy.runtimes.kubernetes_fake``, in this process: a Job controller and a
kubelet running pods as local processes), tensors in a real S3 server (``MURPHY_TEST_MOTO_URL``,
else a moto server started here).

1. create → first pod: ``CreateTrainingJob`` sent → the fake API server has the job's first pod
   (its store polled every 2 ms).
2. finding → Job deleted: the rule's ``result.json`` ``ended_at`` → murphy's DELETE of the training
   Job (its ``deletionTimestamp`` set: murphy's own reaction), → the Job gone from the API server
   (the Foreground delete done: its pods exited, which includes the toolkit's last tensor upload
   after SIGTERM), and → Describe says Stopped.
3. API requests per running job: the requests murphy sends while one job (training + one rule,
   20 steps a second) runs, counted by the fake API server over two windows far apart in steps.
   Bounded: the second window's rate must not exceed the first's by more than 20 %.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
import servers  # noqa: E402
from murphy.runtimes.kubernetes_fake import FakeCluster  # noqa: E402

STEPS = """import json, os, sys, time
import numpy as np
from _rules_data import write_collections_file, write_step
from murphy.storage import open_store

bad_from = int(sys.argv[sys.argv.index('--bad_from') + 1])
out = json.load(open(os.environ["SMDEBUG_CONFIG_FILE_PATH"])).get("LocalPath")
store = open_store(out)
write_collections_file(store)
rng = np.random.default_rng(0)
for step in range(100000):
    write_step(store, step, rng, bad=step >= bad_from)
    print(f"step {step}", flush=True)
    time.sleep(0.05)
"""
QUICK = """print("started", flush=True)
"""


def _wait(pred: Callable[[], Any], timeout: float, what: str, every: float = 0.002) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(every)


def _pods_of(cluster: FakeCluster, job: str) -> list[dict[str, Any]]:
    return [p for p in cluster.store.iter_all("pods")
            if (p["metadata"].get("labels") or {}).get("murphy.io/training-job") == job]


def _training_jobs(cluster: FakeCluster, job: str) -> list[dict[str, Any]]:
    return [j for j in cluster.store.iter_all("jobs")
            if (j["metadata"].get("labels") or {}).get("murphy.io/training-job") == job
            and (j["metadata"].get("labels") or {}).get("murphy.io/role") == "training"]


def run(trials: int, tarball: Callable[[Path, dict[str, str]], bytes], request: Callable[..., dict[str, Any]],
        window_s: float = 10.0) -> dict[str, Any]:
    import boto3

    tmp = Path(tempfile.mkdtemp(prefix="murphy-launch-k8s-"))
    s3 = servers.start("moto")
    bucket = servers.new_bucket(s3, "bench")
    s3c = s3.client()
    helper = (HERE / "_rules_data.py").read_text()
    s3c.put_object(Bucket=bucket, Key="src/quick.tar.gz", Body=tarball(tmp / "src-quick", {"train.py": QUICK}))
    s3c.put_object(Bucket=bucket, Key="src/steps.tar.gz", Body=tarball(tmp / "src-steps", {"train.py": STEPS, "_rules_data.py": helper}))
    # The pods run as this user (the venv's interpreter need not be readable by uid 1000), and
    # "python" in them is this venv's (an image's own python has murphy in it).
    cluster = FakeCluster(str(tmp / "fake-k8s"), run_as_user=False)
    cluster.start()
    env = {**os.environ, **s3.env()}
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    port = servers.free_port()
    log = open(tmp / "server.log", "wb")  # noqa: SIM115
    server = subprocess.Popen([sys.executable, "-m", "murphy.cli", "server", "--port", str(port), "--data-dir", str(tmp / "data"),
                               "--runtime", "kubernetes", "--kubeconfig", cluster.kubeconfig, "--object-store", "s3",
                               "--s3-endpoint-url", s3.endpoint_url, "--log-level", "warning"],
                              stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def body(name: str, source: str, hyper: dict[str, str], rule: bool) -> dict[str, Any]:
        b = request(name, f"s3://{bucket}/{source}", hyper, rule)
        b["OutputDataConfig"]["S3OutputPath"] = f"s3://{bucket}/out"
        if rule:
            b["DebugHookConfig"]["S3OutputPath"] = f"s3://{bucket}/debug"
        b["Environment"] = {"PATH": path}
        return b

    out: dict[str, Any] = {"first_pod": [], "finding_to_delete": [], "finding_to_deleted": [], "finding_to_stopped": []}
    try:
        endpoint = f"http://127.0.0.1:{port}"
        _wait(lambda: _healthy(endpoint), 60, "murphy server", every=0.1)
        client = boto3.client("sagemaker", endpoint_url=endpoint, region_name="us-west-2",
                              aws_access_key_id="bench", aws_secret_access_key="bench")
        for i in range(trials):
            name = f"k8s-launch-{i}"
            t0 = time.time()
            client.create_training_job(**body(name, "src/quick.tar.gz", {}, rule=False))
            _wait(lambda name=name: _pods_of(cluster, name), 60, f"{name}'s pod")
            out["first_pod"].append(time.time() - t0)
            _wait(lambda name=name: client.describe_training_job(TrainingJobName=name)["TrainingJobStatus"] != "InProgress",
                  120, f"{name} to end", every=0.1)
        for i in range(max(3, trials // 4)):
            name = f"k8s-finding-{i}"
            client.create_training_job(**body(name, "src/steps.tar.gz", {"bad_from": "20"}, rule=True))
            key = f"debug/{name}/rule-output/ExplodingTensor/result.json"
            doc = _wait(lambda key=key: _get_json(s3c, bucket, key), 180, f"{name}'s finding", every=0.005)
            found = _epoch(doc["ended_at"])
            _wait(lambda name=name: all(j["metadata"].get("deletionTimestamp") for j in _training_jobs(cluster, name)),
                  180, f"{name}'s Job deletion")
            out["finding_to_delete"].append(time.time() - found)
            _wait(lambda name=name: not _training_jobs(cluster, name), 180, f"{name}'s Job deleted")
            out["finding_to_deleted"].append(time.time() - found)
            _wait(lambda name=name: client.describe_training_job(TrainingJobName=name)["TrainingJobStatus"] == "Stopped",
                  60, f"{name} Stopped", every=0.01)
            out["finding_to_stopped"].append(time.time() - found)
        # The request rate of one running job, early and late (steps: 20 a second).
        name = "k8s-rate"
        client.create_training_job(**body(name, "src/steps.tar.gz", {"bad_from": "1000000000"}, rule=True))
        _wait(lambda: client.describe_training_job(TrainingJobName=name)["SecondaryStatus"] == "Training", 120,
              "k8s-rate training", every=0.1)
        time.sleep(3.0)  # past the launch's own requests
        windows = []
        for gap in (0.0, 3 * window_s):
            time.sleep(gap)
            cluster.requests.reset()
            t = time.time()
            time.sleep(window_s)
            snap = cluster.requests.snapshot()
            windows.append({"at_s": t, "per_s": sum(snap.values()) / (time.time() - t), "by": snap})
        client.stop_training_job(TrainingJobName=name)
        _wait(lambda: client.describe_training_job(TrainingJobName=name)["TrainingJobStatus"] == "Stopped", 300,
              "k8s-rate Stopped", every=0.2)
        out["rate"] = windows
    finally:
        server.terminate()
        server.wait(15)
        cluster.stop()
        s3.stop()
    return out


def _healthy(endpoint: str) -> bool:
    try:
        urllib.request.urlopen(f"{endpoint}/healthz", timeout=1)
        return True
    except OSError:
        return False


def _get_json(s3c: Any, bucket: str, key: str) -> dict[str, Any] | None:
    try:
        doc: dict[str, Any] = json.loads(s3c.get_object(Bucket=bucket, Key=key)["Body"].read())
        return doc if doc.get("status") == "IssuesFound" else None
    except Exception:
        return None


def _epoch(iso: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
