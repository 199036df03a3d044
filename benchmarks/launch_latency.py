"""Control-plane latencies with the process runtime, through the stock boto3 client.

1. create → running: ``CreateTrainingJob`` sent → the training script's first line runs (a
   script-mode job whose ``train.py`` writes ``time.time()`` to a file before importing anything).
   Target p95 ≤ 0.5 s.
2. finding → Stopped: a script-mode job writes one step every 50 ms with murphy's writer
   (benchmarks/_rules_data.py), non-finite from step 20 on, and never stops by itself; an
   ExplodingTensor rule watches it. Measured from the rule's ``result.json`` ``ended_at`` (the
   finding written) to the first DescribeTrainingJob (polled every 10 ms) that says ``Stopped``;
   also from the bad step written by the script to ``Stopped`` (the whole path: mirror upload,
   rule poll, supervisor, SIGTERM). Target p95 ≤ 2 s. SageMaker's figure for the same path is
   minutes (rule jobs poll S3 and a Lambda calls StopTrainingJob).

With ``--runtime kubernetes`` (benchmarks/_launch_k8s.py): the same job through ``murphy server
--runtime kubernetes`` and murphy's fake Kubernetes API server: create → first pod created,
finding → training Job deleted (and → Stopped), and the API requests murphy makes per running job
in two windows far apart in steps (bounded: it must not grow with the number of steps).

usage: python benchmarks/launch_latency.py [--trials 20] [--runtime process|kubernetes]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import machine, table  # noqa: E402
from murphy.sdk.estimator import source_tarball  # noqa: E402

IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
RULE_IMAGE = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"

STARTED = """import sys, time
t = time.time()
open(sys.argv[sys.argv.index('--marker') + 1], 'w').write(repr(t))
"""

EXPLODES = """import json, os, sys, time
import numpy as np
from _rules_data import write_collections_file, write_step
from murphy.storage import open_store

out = json.load(open(os.environ["SMDEBUG_CONFIG_FILE_PATH"])).get("LocalPath")
store = open_store(out)
write_collections_file(store)
rng = np.random.default_rng(0)
for step in range(100000):
    write_step(store, step, rng, bad=step >= 20)
    if step == 20:
        print(json.dumps({"bad_written": time.time()}), flush=True)
    time.sleep(0.05)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tarball(src: Path, files: dict[str, str]) -> bytes:
    """``files`` written to ``src``, packed by the SDK as a user's source_dir is."""
    src.mkdir(parents=True)
    for name, text in files.items():
        (src / name).write_text(text)
    return source_tarball(str(src / "train.py"), str(src))


def request(name: str, source: str, hyper: dict[str, str], rule: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/Bench",
        "HyperParameters": {"sagemaker_program": '"train.py"', "sagemaker_submit_directory": json.dumps(source), **hyper},
        "OutputDataConfig": {"S3OutputPath": "s3://bench/out"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
    }
    if rule:
        body["DebugHookConfig"] = {"S3OutputPath": "s3://bench/debug", "CollectionConfigurations": []}
        body["DebugRuleConfigurations"] = [{"RuleConfigurationName": "ExplodingTensor", "RuleEvaluatorImage": RULE_IMAGE,
                                            "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}]
    return body


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--runtime", choices=["process", "kubernetes"], default="process")
    args = ap.parse_args()
    if args.runtime == "kubernetes":
        return kubernetes(args.trials)
    tmp = Path(tempfile.mkdtemp(prefix="murphy-launch-"))
    port = free_port()
    log = open(tmp / "server.log", "wb")  # noqa: SIM115
    server = subprocess.Popen([sys.executable, "-m", "murphy.cli", "server", "--port", str(port), "--data-dir", str(tmp / "data"),
                               "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{endpoint}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        client = boto3.client("sagemaker", endpoint_url=endpoint, region_name="us-west-2",
                              aws_access_key_id="bench", aws_secret_access_key="bench")
        buckets = tmp / "data" / "buckets" / "bench"
        (buckets / "src").mkdir(parents=True)
        (buckets / "src" / "started.tar.gz").write_bytes(tarball(tmp / "src-started", {"train.py": STARTED}))
        (buckets / "src" / "explodes.tar.gz").write_bytes(tarball(tmp / "src-explodes", {"train.py": EXPLODES,
                                                                    "_rules_data.py": (HERE / "_rules_data.py").read_text()}))
        launch: list[float] = []
        for i in range(args.trials):
            marker = tmp / f"started-{i}"
            t0 = time.time()
            client.create_training_job(**request(f"launch-{i}", "s3://bench/src/started.tar.gz", {"marker": str(marker)}, rule=False))
            while not marker.exists() or not marker.read_text():
                time.sleep(0.002)
            launch.append(float(marker.read_text()) - t0)
            while client.describe_training_job(TrainingJobName=f"launch-{i}")["TrainingJobStatus"] == "InProgress":
                time.sleep(0.05)
        stop_from_finding: list[float] = []
        stop_from_bad: list[float] = []
        logs = boto3.client("logs", endpoint_url=endpoint, region_name="us-west-2",
                            aws_access_key_id="bench", aws_secret_access_key="bench")
        for i in range(max(5, args.trials // 2)):
            name = f"finding-{i}"
            client.create_training_job(**request(name, "s3://bench/src/explodes.tar.gz", {}, rule=True))
            while True:
                job = client.describe_training_job(TrainingJobName=name)
                if job["TrainingJobStatus"] in ("Stopped", "Completed", "Failed"):
                    seen = time.time()
                    break
                time.sleep(0.01)
            if job["TrainingJobStatus"] != "Stopped":
                sys.exit(f"{name} ended {job['TrainingJobStatus']}: {job.get('FailureReason')}\n{(tmp / 'server.log').read_text()[-2000:]}")
            result = json.loads((tmp / "data" / "buckets" / "bench" / "debug" / name / "rule-output" / "ExplodingTensor" / "result.json").read_text())
            found = dt.datetime.fromisoformat(result["ended_at"].replace("Z", "+00:00")).timestamp()
            stop_from_finding.append(seen - found)
            stream = logs.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=f"{name}/")["logStreams"][0]
            events = logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream["logStreamName"], startFromHead=True)["events"]
            bad = next(json.loads(e["message"])["bad_written"] for e in events if "bad_written" in e["message"])
            stop_from_bad.append(seen - bad)
    finally:
        server.terminate()
        server.wait(15)
    print(f"launch_latency — {machine()}, process runtime, {args.trials} launches, {len(stop_from_finding)} stops")
    rows = []
    for label, values, target in (("create -> training script running", launch, 0.5),
                                  ("finding written -> Describe says Stopped", stop_from_finding, 2.0),
                                  ("bad step written -> Describe says Stopped", stop_from_bad, None)):
        p95 = pct(values, 95)
        verdict = "" if target is None else ("PASS" if p95 <= target else "MISS")
        rows.append([label, f"{pct(values, 50) * 1000:.0f} ms", f"{p95 * 1000:.0f} ms",
                     "" if target is None else f"<= {target * 1000:.0f} ms", verdict])
    print(table(["path", "p50", "p95", "target (p95)", ""], rows))


def kubernetes(trials: int) -> None:
    import _launch_k8s

    out = _launch_k8s.run(trials, tarball, request)
    print(f"launch_latency — {machine()}, kubernetes runtime (murphy's fake API server), "
          f"{len(out['first_pod'])} launches, {len(out['finding_to_deleted'])} stops")
    rows = [[label, f"{pct(v, 50) * 1000:.0f} ms", f"{pct(v, 95) * 1000:.0f} ms"]
            for label, v in (("create -> first pod created", out["first_pod"]),
                             ("finding written -> Job DELETE (deletionTimestamp)", out["finding_to_delete"]),
                             ("finding written -> training Job gone", out["finding_to_deleted"]),
                             ("finding written -> Describe says Stopped", out["finding_to_stopped"]))]
    print(table(["path", "p50", "p95"], rows))
    early, late = out["rate"]
    grows = late["per_s"] > 1.2 * early["per_s"]
    print(f"API requests per running job (training + 1 rule, 20 steps/s): {early['per_s']:.2f}/s in the first window, "
          f"{late['per_s']:.2f}/s {late['at_s'] - early['at_s']:.0f} s (~{(late['at_s'] - early['at_s']) * 20:.0f} steps) later: "
          f"{'GROWS' if grows else 'bounded'}")
    print("  by request:", json.dumps(late["by"], sort_keys=True))
    if grows:
        sys.exit(1)


if __name__ == "__main__":
    main()
