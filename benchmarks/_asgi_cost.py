"""Server-side cost of one DescribeTrainingJob through murphy's whole ASGI app, in process
(no sockets, no clients): the part of a request that SigV4 verification adds to, measured
without the noise of client threads sharing the CPUs. Used by api_load.py --auth."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any


def describe_cost_us(auth: bool, n: int = 4000, rounds: int = 5) -> float:
    """Best-of-``rounds`` mean CPU microseconds per describe (auth: ``--auth sigv4``, signed by botocore)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from murphy.api.app import create_app
    from murphy.auth.keys import KeyRing
    from murphy.jobs.service import JobService
    from murphy.runtimes.fake import FakeRuntime
    from murphy.settings import Settings
    from murphy.store.memory import InMemoryJobStore

    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="murphy-asgi-")), runtime="fake",
                        auth="sigv4" if auth else "none")
    store = InMemoryJobStore()
    service = JobService(store, FakeRuntime(), settings)
    key = KeyRing(store, settings).create("123456789012")["AccessKey"]
    app = create_app(service, settings)
    service.create_training_job({
        "TrainingJobName": "j", "RoleArn": "arn:aws:iam::123456789012:role/r",
        "AlgorithmSpecification": {"TrainingImage": "murphy/python:latest", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60}}, account="123456789012", region="us-west-2")
    body = json.dumps({"TrainingJobName": "j"}).encode()
    req = AWSRequest(method="POST", url="http://127.0.0.1:8080/", data=body, headers={
        "X-Amz-Target": "SageMaker.DescribeTrainingJob", "Content-Type": "application/x-amz-json-1.1",
        "User-Agent": "Boto3/1.35 md/Botocore#1.35 ua/2.0 os/linux lang/python#3.11"})
    SigV4Auth(Credentials(key["AccessKeyId"], key["SecretAccessKey"]), "sagemaker", "us-west-2").add_auth(req)
    headers = [(b"host", b"127.0.0.1:8080"), (b"content-length", str(len(body)).encode()),
               (b"accept-encoding", b"identity")]
    headers += [(k.lower().encode(), (v if isinstance(v, str) else v.decode()).encode()) for k, v in req.headers.items()]
    scope_base: dict[str, Any] = {"type": "http", "http_version": "1.1", "method": "POST", "scheme": "http",
                                  "path": "/", "raw_path": b"/", "query_string": b"", "root_path": "",
                                  "headers": headers, "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 5555)}
    statuses: list[int] = []

    async def once() -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await app(dict(scope_base), receive, send)

    async def run() -> float:
        await once()
        best = float("inf")
        for _ in range(rounds):
            # CPU time of this process, not wall time: other processes on a shared machine
            # then slow the measurement far less.
            t0 = time.process_time()
            for _ in range(n):
                await once()
            best = min(best, (time.process_time() - t0) / n)
        return best * 1e6

    cost = asyncio.run(run())
    if set(statuses) != {200}:
        raise SystemExit(f"describe through the app answered {sorted(set(statuses))}, not 200")
    return cost
