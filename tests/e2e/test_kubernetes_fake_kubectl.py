"""Black-box: the fake Kubernetes API server driven by the real ``kubectl`` (Debian's
kubernetes-client) as a user would: ``apply -f``, ``get``, ``logs -f``, ``delete``; and what
``murphy kubernetes render`` prints, applied with kubectl, really training (the demo through the
toolkit, its model uploaded to the moto S3 server) on the fake cluster.

kubectl's client-side validation needs the server's OpenAPI documents, which the fake does not
serve: ``--validate=false``, as for any server without them.
"""

# ruff: noqa: F811

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from k8s_fake import fake_k8s  # noqa: F401 (the fixture; tests name it as a parameter)
from murphy.runtimes.kubernetes_fake import FakeCluster

REPO = Path(__file__).resolve().parents[2]
MURPHY = str(Path(sys.executable).parent / "murphy")
pytestmark = pytest.mark.slow

HELLO = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: greet}
data: {WHO: world}
---
apiVersion: batch/v1
kind: Job
metadata: {name: hello}
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 5
      containers:
      - name: main
        image: python:3.11-slim
        command: ["python3", "-c", "import os, time\\nfor i in range(3):\\n    print('hello', os.environ['WHO'], os.environ['JOB_COMPLETION_INDEX'], i, flush=True); time.sleep(0.2)\\nif os.environ['JOB_COMPLETION_INDEX'] == '0':\\n    time.sleep(float(os.environ.get('LINGER', '0')))"]
        envFrom: [{configMapRef: {name: greet}}]
"""


def kubectl_exe() -> str:
    exe = shutil.which("kubectl")
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kubectl is missing (apt-get install kubernetes-client); CI must run the kubectl tests")
        pytest.skip("kubectl is not installed (apt-get install kubernetes-client)")
    return exe


def kubectl(cluster: FakeCluster, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
    proc = subprocess.run([kubectl_exe(), "--kubeconfig", cluster.kubeconfig, *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"kubectl {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def get(cluster: FakeCluster, *args: str) -> Any:
    return json.loads(kubectl(cluster, "get", *args, "-o", "json"))


def test_kubectl_apply_get_logs_delete(fake_k8s: FakeCluster, tmp_path: Path) -> None:
    manifest = tmp_path / "hello.yaml"
    manifest.write_text(HELLO.replace("'LINGER', '0'", "'LINGER', '60'"))
    out = kubectl(fake_k8s, "apply", "--validate=false", "-f", str(manifest))
    assert out.splitlines() == ["configmap/greet created", "job.batch/hello created"]
    assert kubectl(fake_k8s, "apply", "--validate=false", "-f", str(manifest)).splitlines() == [
        "configmap/greet unchanged", "job.batch/hello unchanged"]
    fake_k8s.wait_for(lambda: len([p for p in get(fake_k8s, "pods")["items"] if p["status"].get("phase") in ("Running", "Succeeded")]) == 2,
                      what="two started pods")
    pods = sorted(p["metadata"]["name"] for p in get(fake_k8s, "pods", "-l", "batch.kubernetes.io/job-name=hello")["items"])
    table = kubectl(fake_k8s, "get", "pods").splitlines()
    assert table[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"] and len(table) == 3
    logs = kubectl(fake_k8s, "logs", "-f", pods[1])
    assert logs.splitlines() == [f"hello world 1 {i}" for i in range(3)]
    # While pod 0 lingers, a cascading delete stops it (kubectl's default: background).
    out = kubectl(fake_k8s, "delete", "-f", str(manifest), "--wait=true", timeout=60)
    assert out.splitlines() == ['configmap "greet" deleted', 'job.batch "hello" deleted']
    fake_k8s.wait_for(lambda: not get(fake_k8s, "pods")["items"], what="the pods gone")
    killing = get(fake_k8s, "events", "--field-selector", "reason=Killing")["items"]
    assert {e["involvedObject"]["name"] for e in killing} == {pods[0]}


def test_kubectl_errors_are_the_servers(fake_k8s: FakeCluster) -> None:
    proc = subprocess.run([kubectl_exe(), "--kubeconfig", fake_k8s.kubeconfig, "get", "job", "nope"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1 and 'jobs.batch "nope" not found' in proc.stderr
    node = get(fake_k8s, "nodes")["items"][0]
    assert node["status"]["conditions"][0]["type"] == "Ready"


def test_render_output_applied_with_kubectl_trains_on_the_fake(fake_k8s: FakeCluster, moto_server: Any) -> None:
    s3 = moto_server.client()
    s3.create_bucket(Bucket="demo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(moto_server.env())
    request = REPO / "tests" / "data" / "kubernetes_requests" / "demo-minimal.json"
    rendered = subprocess.run([MURPHY, "kubernetes", "render", "--request", str(request), "--namespace", "murphy-jobs",
                               "--s3-endpoint", moto_server.endpoint_url, "--credentials-from-env"],
                              capture_output=True, text=True, timeout=120, env=env, check=True).stdout
    out = kubectl(fake_k8s, "apply", "--validate=false", "-f", "-", stdin=rendered)
    kinds = [line.split("/")[0] for line in out.splitlines()]
    assert kinds == ["configmap", "secret", "job.batch"]
    job_name = out.splitlines()[2].split("/")[1].split()[0]

    def finished() -> Any:
        job = get(fake_k8s, "job", job_name, "-n", "murphy-jobs")
        done = [c["type"] for c in job.get("status", {}).get("conditions", []) if c["type"] in ("Complete", "Failed")]
        return done and job

    job = fake_k8s.wait_for(finished, timeout=240, what="the rendered training Job to finish")
    pod = get(fake_k8s, "pods", "-n", "murphy-jobs", "-l", f"batch.kubernetes.io/job-name={job_name}")["items"][0]
    logs = kubectl(fake_k8s, "logs", "-n", "murphy-jobs", pod["metadata"]["name"], "-c", "algo")
    assert [c["type"] for c in job["status"]["conditions"]] == ["SuccessCriteriaMet", "Complete"], logs
    assert "murphy-toolkit INFO program exited with code 0" in logs
    init = pod["status"]["initContainerStatuses"][0]
    assert (init["name"], init["state"]["terminated"]["reason"]) == ("murphy-init", "Completed")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="demo").get("Contents", [])]
    assert "output/demo/output/model.tar.gz" in keys, keys


def test_a_failing_rendered_job_carries_the_toolkits_failure_message(fake_k8s: FakeCluster, moto_server: Any) -> None:
    """The failure file is the container's terminationMessagePath: the toolkit's reason (here: an
    empty input channel) reaches the pod status, as murphy's failure mapping reads it."""
    s3 = moto_server.client()
    s3.create_bucket(Bucket="empty-inputs")
    request = json.loads((REPO / "tests" / "data" / "kubernetes_requests" / "pytorch-with-rules.json").read_text())
    request["TrainingJobName"] = "no-data"
    request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] = "s3://empty-inputs/train"
    request["HyperParameters"]["sagemaker_submit_directory"] = '"s3://empty-inputs/code/sourcedir.tar.gz"'
    request["DebugRuleConfigurations"] = []
    path = fake_k8s.root + "/request.json"
    Path(path).write_text(json.dumps(request))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(moto_server.env())
    rendered = subprocess.run([MURPHY, "kubernetes", "render", "--request", path, "--namespace", "murphy-jobs",
                               "--s3-endpoint", moto_server.endpoint_url, "--credentials-from-env"],
                              capture_output=True, text=True, timeout=120, env=env, check=True).stdout
    out = kubectl(fake_k8s, "apply", "--validate=false", "-f", "-", stdin=rendered)
    job_name = next(ln for ln in out.splitlines() if ln.startswith("job.batch/")).split("/")[1].split()[0]
    job = fake_k8s.wait_for(lambda: (j := get(fake_k8s, "job", job_name, "-n", "murphy-jobs")) and any(
        c["type"] == "Failed" for c in j.get("status", {}).get("conditions", [])) and j, timeout=240, what="the Job failing")
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "PodFailurePolicy" and "Container algo" in failed["message"]
    pod = get(fake_k8s, "pods", "-n", "murphy-jobs", "-l", f"batch.kubernetes.io/job-name={job_name}")["items"][0]
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 1 and term["message"] == "channel 'train': no objects at s3://empty-inputs/train", term


def test_kubectl_run_and_create_job_use_the_images_cmd(fake_k8s: FakeCluster) -> None:
    """``kubectl run ... -- ARGS`` sets args (the image's CMD is replaced, its ENTRYPOINT kept);
    ``kubectl create job ... -- CMD`` sets command."""
    kubectl(fake_k8s, "run", "solo", "--image=python:3.11-slim", "--restart=Never", "--",
            "python3", "-c", "print('solo pod')")
    kubectl(fake_k8s, "create", "job", "quick", "--image=python:3.11-slim", "--", "python3", "-c", "print('quick job')")
    kubectl(fake_k8s, "wait", "--for=condition=complete", "job/quick", "--timeout=60s", timeout=90)
    kubectl(fake_k8s, "wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/solo", "--timeout=60s", timeout=90)
    assert kubectl(fake_k8s, "logs", "solo") == "solo pod\n"
    assert kubectl(fake_k8s, "logs", "job/quick") == "quick job\n"
    kubectl(fake_k8s, "delete", "pod", "solo", "--grace-period=0", "--force")
    fake_k8s.wait_for(lambda: fake_k8s.store.find("pods", "default", "solo") is None, what="solo gone")
