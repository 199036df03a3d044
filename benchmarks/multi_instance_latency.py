"""Detection latency of a 2-host job vs a 1-host job (issue 17 §5), process runtime, boto3.

The same ``torch_distributed`` script (benchmarks/_multi_train.py, gloo, one step every 50 ms,
smdebug's hook with ``include_workers=all``) runs as a 1-host job (one rank) and as a 2-host job
(``algo-1`` + ``algo-2``, torchrun across them); the last rank's input gets a NaN at step 20, an
ExplodingTensor rule watches. Latency = the first DescribeTrainingJob (polled every 10 ms) whose
rule status is ``IssuesFound`` minus the wall-clock time the last rank finished the NaN step's
backward (its ``nan_at`` log line); also to ``Stopped`` (every host gone). A 2-host step is
complete for the rule only once both workers wrote it, so what the second host adds is its own
mirror pass and the wait for the slower worker. Rounds interleave 1-host and 2-host jobs (the
machine's load hits both alike); medians with 95 % bootstrap intervals, and the median of the
per-round differences against the target (2-host within 0.5 s of 1-host).

usage: python benchmarks/multi_instance_latency.py [--rounds 6]
"""

from __future__ import annotations

import argparse
import json
import os
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

IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1.0-cpu-py310"
RULE_IMAGE = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"
TARGET_S = 0.5
GROUP = "/aws/sagemaker/TrainingJobs"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request(name: str, hosts: int) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/Bench",
        "HyperParameters": {"sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://bench/src/multi.tar.gz"',
                            "sagemaker_torch_distributed_enabled": "true"},
        "OutputDataConfig": {"S3OutputPath": "s3://bench/out"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": hosts, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        "DebugHookConfig": {"S3OutputPath": "s3://bench/debug", "HookParameters": {"include_workers": "all", "save_interval": "1"},
                            "CollectionConfigurations": [{"CollectionName": "gradients"}, {"CollectionName": "losses"}]},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "ExplodingTensor", "RuleEvaluatorImage": RULE_IMAGE,
                                     "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}],
    }


def run_job(client: Any, logs: Any, name: str, hosts: int) -> tuple[float, float]:
    """(NaN -> IssuesFound, NaN -> Stopped) in seconds."""
    client.create_training_job(**request(name, hosts))
    found = None
    while True:
        job = client.describe_training_job(TrainingJobName=name)
        rule = job["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"]
        if found is None and rule == "IssuesFound":
            found = time.time()
        if job["TrainingJobStatus"] in ("Stopped", "Completed", "Failed"):
            stopped = time.time()
            break
        time.sleep(0.01)
    if job["TrainingJobStatus"] != "Stopped" or found is None:
        sys.exit(f"{name} ended {job['TrainingJobStatus']} ({rule}): {job.get('FailureReason')}")
    stream = f"{name}/algo-{hosts}-"  # the last rank's host
    names = [s["logStreamName"] for s in logs.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix=stream)["logStreams"]]
    events = logs.get_log_events(logGroupName=GROUP, logStreamName=names[0], startFromHead=True)["events"]
    nan_at = next(json.loads(e["message"])["nan_at"] for e in events if e["message"].startswith('{"nan_at"'))
    return found - nan_at, stopped - nan_at


def ci(values: list[float], rng: np.random.Generator) -> tuple[float, float, float]:
    a = np.array(values)
    boots = np.median(rng.choice(a, size=(2000, len(a))), axis=1)
    return float(np.median(a)), float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="murphy-multi-"))
    port = free_port()
    log = open(tmp / "server.log", "wb")  # noqa: SIM115
    server = subprocess.Popen([sys.executable, "-m", "murphy.cli", "server", "--port", str(port), "--data-dir", str(tmp / "data"),
                               "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    results: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
    try:
        endpoint = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{endpoint}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        kw = {"endpoint_url": endpoint, "region_name": "us-west-2", "aws_access_key_id": "bench", "aws_secret_access_key": "bench"}
        client, logs = boto3.client("sagemaker", **kw), boto3.client("logs", **kw)
        src = tmp / "src"
        src.mkdir()
        (src / "train.py").write_text((HERE / "_multi_train.py").read_text())
        bucket = tmp / "data" / "buckets" / "bench" / "src"
        bucket.mkdir(parents=True)
        (bucket / "multi.tar.gz").write_bytes(source_tarball(str(src / "train.py"), str(src)))
        for r in range(args.rounds):
            for hosts in ((1, 2) if r % 2 == 0 else (2, 1)):
                results[hosts].append(run_job(client, logs, f"multi-{r}-{hosts}", hosts))
                print(f"round {r} hosts {hosts}: {results[hosts][-1][0]:.3f} s to IssuesFound", file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait(15)
    rng = np.random.default_rng(0)
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"multi_instance_latency — {machine()}, load average {load}, process runtime, {args.rounds} interleaved rounds")
    rows = []
    for i, label in enumerate(("NaN -> rule IssuesFound", "NaN -> job Stopped")):
        one, two = [x[i] for x in results[1]], [x[i] for x in results[2]]
        diff = [b - a for a, b in zip(one, two, strict=True)]
        m1, m2, md = ci(one, rng), ci(two, rng), ci(diff, rng)
        verdict = ("PASS" if md[0] <= TARGET_S else "MISS") if i == 0 else ""
        rows.append([label, f"{m1[0]:.3f} [{m1[1]:.3f}, {m1[2]:.3f}]", f"{m2[0]:.3f} [{m2[1]:.3f}, {m2[2]:.3f}]",
                     f"{md[0]:+.3f} [{md[1]:+.3f}, {md[2]:+.3f}]", f"<= +{TARGET_S}" if i == 0 else "", verdict])
    print(table(["path (median s, 95% CI)", "1 host", "2 hosts", "2 - 1 (per round)", "target", ""], rows))


if __name__ == "__main__":
    main()
