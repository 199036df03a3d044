"""The Kubernetes runtime on a REAL cluster (opt-in): the seed job through the stock boto3 client.

Skipped unless ``MURPHY_K8S_E2E=1`` and the current ``KUBECONFIG`` context answers. What the
cluster needs (docs/kubernetes.md, "Running the real-cluster tests"):

- murphy's images under their local tags, pullable or preloaded (``make images-cpu``, then e.g.
  ``kind load docker-image murphy/linear-regression-demo:latest murphy/rule-evaluator:latest``);
- an S3 endpoint this machine reaches: ``MURPHY_K8S_E2E_S3_ENDPOINT``, with the usual
  ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, and a bucket ``MURPHY_K8S_E2E_BUCKET``; the
  pods reach S3 only through murphy's S3 gateway, served here on 0.0.0.0 at the port of
  ``MURPHY_K8S_E2E_PODS_GATEWAY_URL``, this machine's address as the pods reach it.

Each test runs in a throwaway namespace, created here and deleted (with everything in it) at the
end. The same paths run in CI against murphy's fake API server (test_kubernetes_runtime_e2e.py).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = [pytest.mark.slow]

RULE_IMAGE = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"
EXPLODING = {"lr": "100", "scale": "100000000000", "steps": "3000", "debug_frequency": "1"}


def _why_not() -> str | None:
    if os.environ.get("MURPHY_K8S_E2E") != "1":
        return "real-cluster tests run only with MURPHY_K8S_E2E=1 and a reachable KUBECONFIG context"
    missing = [k for k in ("MURPHY_K8S_E2E_S3_ENDPOINT", "MURPHY_K8S_E2E_BUCKET", "MURPHY_K8S_E2E_PODS_GATEWAY_URL")
               if not os.environ.get(k)]
    if missing:
        return f"MURPHY_K8S_E2E=1 but {', '.join(missing)} not set"
    try:
        from lightkube import Client
        from lightkube.resources.core_v1 import Namespace

        Client().get(Namespace, "default")
    except Exception as exc:  # any failure to reach the cluster, said plainly
        return f"the KUBECONFIG context does not answer: {exc}"
    return None


@pytest.fixture
def namespace() -> Iterator[str]:
    why = _why_not()
    if why:
        # Asked for (MURPHY_K8S_E2E=1) but not runnable is a failure, never a quiet skip.
        (pytest.fail if os.environ.get("MURPHY_K8S_E2E") == "1" else pytest.skip)(why)
    from lightkube import Client
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import Namespace

    client = Client()
    name = f"murphy-e2e-{uuid.uuid4().hex[:8]}"
    client.create(Namespace(metadata=ObjectMeta(name=name, labels={"murphy.io/e2e": "true"})))
    try:
        yield name
    finally:
        client.delete(Namespace, name)


def test_the_seed_job_is_stopped_on_a_real_cluster(make_server: Any, namespace: str) -> None:
    from lightkube import Client
    from lightkube.resources.batch_v1 import Job

    endpoint = os.environ["MURPHY_K8S_E2E_S3_ENDPOINT"]
    bucket = os.environ["MURPHY_K8S_E2E_BUCKET"]
    server = make_server("--runtime", "kubernetes", "--kubernetes-namespace", namespace,
                         "--object-store", "s3", "--s3-endpoint-url", endpoint,
                         "--pods-s3-gateway-url", os.environ["MURPHY_K8S_E2E_PODS_GATEWAY_URL"])
    client = server.client()
    name = f"seed-{namespace[-8:]}"
    client.create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={"TrainingImage": "murphy/linear-regression-demo:latest", "TrainingInputMode": "File"},
        RoleArn="arn:aws:iam::123456789012:role/SageMakerRole", HyperParameters=EXPLODING,
        OutputDataConfig={"S3OutputPath": f"s3://{bucket}/{namespace}/output"},
        ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 900},
        DebugHookConfig={"S3OutputPath": f"s3://{bucket}/{namespace}/debug", "CollectionConfigurations": []},
        DebugRuleConfigurations=[{"RuleConfigurationName": "ExplodingTensor", "RuleEvaluatorImage": RULE_IMAGE,
                                  "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}],
    )
    deadline = time.monotonic() + 600  # image pulls on a fresh node take minutes
    while True:
        job = client.describe_training_job(TrainingJobName=name)
        if job["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
            break
        assert time.monotonic() < deadline, (job["TrainingJobStatus"], job["SecondaryStatus"])
        time.sleep(2)
    assert job["TrainingJobStatus"] == "Stopped", (job.get("FailureReason"), server.log()[-3000:])
    rule = job["DebugRuleEvaluationStatuses"][0]
    assert rule["RuleEvaluationStatus"] == "IssuesFound", rule
    # Nothing of the job is left running in the namespace once it is Stopped.
    kube = Client()
    deadline = time.monotonic() + 180
    while list(kube.list(Job, namespace=namespace, labels={"app.kubernetes.io/managed-by": "murphy"})):
        assert time.monotonic() < deadline, "murphy's Jobs outlived the stopped job"
        time.sleep(2)
