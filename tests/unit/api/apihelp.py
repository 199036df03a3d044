"""Helpers of the API tests: a control plane on the in-memory store and the fake runtime,
request bodies as the SDK sends them, and AWS JSON calls through starlette's TestClient."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from murphy.jobs.service import JobService
from murphy.jobs.supervisor import Supervisor
from murphy.runtimes.fake import FakeRuntime
from murphy.settings import Settings
from murphy.store.memory import InMemoryJobStore

with warnings.catch_warnings():
    # Starlette deprecates running its TestClient on httpx (in favour of httpx2) at import time.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

ACCOUNT = "123456789012"
REGION = "us-west-2"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole"
RULE_IMAGE = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"
AUTH = (f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/{REGION}/sagemaker/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=0")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Plane:
    settings: Settings
    clock: Clock
    store: InMemoryJobStore
    runtime: FakeRuntime
    service: JobService
    supervisor: Supervisor


def make_plane(tmp_path: Path, clock: Clock | None = None) -> Plane:
    clock = clock or Clock()
    settings = Settings(data_dir=tmp_path, runtime="fake", default_region="eu-west-1")
    store = InMemoryJobStore()
    runtime = FakeRuntime(clock=clock, exit_on_stop=True)
    service = JobService(store, runtime, settings, clock=clock)
    supervisor = Supervisor(store, runtime, settings, clock=clock)
    return Plane(settings, clock, store, runtime, service, supervisor)


def training_request(name: str = "job-1", rules: int = 1, **extra: Any) -> dict[str, Any]:
    """A CreateTrainingJob body as the sagemaker SDK sends it (2.257.7, with one Debugger rule)."""
    body: dict[str, Any] = {
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "murphy/linear-regression-demo:latest"},
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
        "TrainingJobName": name,
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "ResourceConfig": {"VolumeSizeInGB": 30, "InstanceCount": 1, "InstanceType": "ml.m5.xlarge"},
        "RoleArn": ROLE,
        "HyperParameters": {"lr": "100", "scale": "100000000000", "steps": "10", "debug_frequency": "1"},
        "DebugHookConfig": {"S3OutputPath": "s3://bucket/out", "CollectionConfigurations": []},
        "DebugRuleConfigurations": [
            {"RuleConfigurationName": f"ExplodingTensor{i or ''}", "RuleEvaluatorImage": RULE_IMAGE,
             "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}
            for i in range(rules)
        ],
        "ProfilerConfig": {"S3OutputPath": "s3://bucket/out", "DisableProfiler": False},
    }
    body.update(extra)
    return body


def aws(client: TestClient, target: str, body: Any, **headers: str) -> httpx.Response:
    """One AWS JSON 1.1 call, as botocore makes it."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": target, "Authorization": AUTH}
    sent.update(headers)
    return client.post("/", content=content, headers={k: v for k, v in sent.items() if v})


def error_of(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()
    return response.status_code, body["__type"], body["message"]
