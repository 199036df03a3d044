"""Black-box: ``murphy kubernetes render`` as a real process, and every manifest murphy ships or
generates (render output for several requests, ``kubectl kustomize infra/kubernetes/...``)
validated with ``kubernetes-validate --strict`` (unknown or misspelled fields fail) against the
oldest Kubernetes minor murphy supports and the newest the validator knows.

The validator lives in its own pinned venv (infra/ci/kubernetes_validate_venv.sh, built on first
use); kubectl comes from Debian's kubernetes-client (.ci/run installs it). Without kubectl the
kustomize tests skip locally and fail in CI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from murphy.runtimes import kubernetes_names as kn
from murphy.runtimes.kubernetes_objects import DEFAULT_S3_ENDPOINT, MIN_KUBERNETES, PLACEHOLDER

REPO = Path(__file__).resolve().parents[2]
MURPHY = str(Path(sys.executable).parent / "murphy")
REQUESTS = sorted((REPO / "tests" / "data" / "kubernetes_requests").glob("*.json"))
KUSTOMIZATIONS = ["infra/kubernetes/base", "infra/kubernetes/overlays/local"]
SECRET = "k8s-render-secret-value-not-for-stdout"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def validator() -> tuple[str, list[str]]:
    """``(kubernetes-validate path, [oldest supported version, newest known])``."""
    proc = subprocess.run(["bash", str(REPO / "infra" / "ci" / "kubernetes_validate_venv.sh")],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"kubernetes-validate venv creation failed:\n{proc.stdout}\n{proc.stderr}"
    python = proc.stdout.strip().splitlines()[-1]
    newest = subprocess.run([python, "-c", "from kubernetes_validate.utils import latest_version as v; print(v())"],
                            capture_output=True, text=True, check=True).stdout.strip()
    return str(Path(python).parent / "kubernetes-validate"), [f"{MIN_KUBERNETES}.0", newest]


def validate(validator: tuple[str, list[str]], path: Path) -> None:
    exe, versions = validator
    assert versions[0] != versions[1]
    for version in versions:
        proc = subprocess.run([exe, "--strict", "--quiet", "-k", version, str(path)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{path.name} against Kubernetes {version}:\n{proc.stdout}\n{proc.stderr}"


def render(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    full.update(env or {})
    return subprocess.run([MURPHY, "kubernetes", "render", *args], capture_output=True, text=True, timeout=120, env=full)


def kubectl() -> str:
    exe = shutil.which("kubectl")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl is missing (apt-get install kubernetes-client); CI must run the kustomize tests")
        pytest.skip("kubectl is not installed (apt-get install kubernetes-client)")
    return exe


@pytest.mark.parametrize("request_file", REQUESTS, ids=[p.stem for p in REQUESTS])
def test_render_prints_valid_manifests(request_file: Path, tmp_path: Path, validator: tuple[str, list[str]]) -> None:
    proc = render("--request", str(request_file), "--namespace", "team-ml")
    assert proc.returncode == 0, proc.stderr
    objs = list(yaml.safe_load_all(proc.stdout))
    request = json.loads(request_file.read_text())
    hosts = request["ResourceConfig"]["InstanceCount"]
    kinds = [o["kind"] for o in objs]
    assert kinds == ["ConfigMap", "Secret", *(["Service"] if hosts > 1 else []), "Job",
                     *["Secret", "Job"] * len(request.get("DebugRuleConfigurations", []))]
    for o in objs:
        assert o["metadata"]["namespace"] == "team-ml"
        assert o["metadata"]["annotations"][kn.JOB_NAME] == request["TrainingJobName"]
        assert o["metadata"]["annotations"][kn.SPEC_HASH] == kn.spec_hash(o)
    out = tmp_path / f"{request_file.stem}.yaml"
    out.write_text(proc.stdout)
    validate(validator, out)
    again = render("--request", str(request_file), "--namespace", "team-ml")
    assert again.stdout == proc.stdout  # deterministic: what a second launch would find by name and hash


def test_render_defaults_and_options(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles.json"
    profiles.write_text(json.dumps([{"pattern": "ml.m5.*", "node_selector": {"pool": "cpu"}}]))
    proc = render("--request", str(REQUESTS[0]), "--profiles", str(profiles), "--s3-endpoint", "http://minio.s3:9000",
                  "--runtime-id", "prod-a", "--region", "eu-west-1")
    assert proc.returncode == 0, proc.stderr
    objs = list(yaml.safe_load_all(proc.stdout))
    assert {o["metadata"]["namespace"] for o in objs} == {"murphy-jobs"}
    assert {o["metadata"]["labels"][kn.RUNTIME_ID] for o in objs} == {"prod-a"}
    assert {o["metadata"]["annotations"][kn.REGION] for o in objs} == {"eu-west-1"}
    jobs = [o for o in objs if o["kind"] == "Job"]
    pod = jobs[0]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "cpu"}
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["AWS_ENDPOINT_URL_S3"] == "http://minio.s3:9000"


def test_credentials_reach_stdout_only_when_asked() -> None:
    env = {"AWS_ACCESS_KEY_ID": "AKIDRENDER", "AWS_SECRET_ACCESS_KEY": SECRET}
    with_rules = next(r for r in REQUESTS if json.loads(r.read_text()).get("DebugRuleConfigurations"))
    proc = render("--request", str(with_rules), env=env)
    assert proc.returncode == 0 and SECRET not in proc.stdout and SECRET not in proc.stderr
    assert "AKIDRENDER" not in proc.stdout and "--credentials-from-env" in proc.stderr
    objs = list(yaml.safe_load_all(proc.stdout))
    secrets = [o for o in objs if o["kind"] == "Secret"]
    assert len(secrets) == 1 + len(json.loads(with_rules.read_text())["DebugRuleConfigurations"])
    for secret in secrets:  # what the runtime creates, its values placeholders: a key per Secret at launch
        assert {k: v for k, v in secret["stringData"].items() if k != "AWS_REGION"} == {
            "AWS_ACCESS_KEY_ID": PLACEHOLDER, "AWS_SECRET_ACCESS_KEY": PLACEHOLDER, "AWS_SESSION_TOKEN": PLACEHOLDER}
    refs = {c["envFrom"][0]["secretRef"]["name"] for o in objs if o["kind"] == "Job"
            for c in o["spec"]["template"]["spec"]["containers"]}
    assert refs == {o["metadata"]["name"] for o in secrets}  # each pod role reads its own
    proc = render("--request", str(with_rules), "--credentials-from-env", env=env)
    objs = list(yaml.safe_load_all(proc.stdout))
    assert all(o["stringData"]["AWS_SECRET_ACCESS_KEY"] == SECRET for o in objs if o["kind"] == "Secret")
    assert all(SECRET not in json.dumps(o) for o in objs if o["kind"] != "Secret")


def test_job_pods_reach_murphy_s_s3_gateway_only() -> None:
    """The base's Service exposes the gateway port, the Deployment serves it and names it to the
    runtime, and the NetworkPolicy lets job pods reach that port of murphy (and DNS), nothing else."""
    base = REPO / "infra" / "kubernetes" / "base"
    docs = [d for f in ("murphy.yaml", "networkpolicy.yaml", "config.yaml")
            for d in yaml.safe_load_all((base / f).read_text()) if d]
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    svc_ports = {p["name"]: p for p in by[("Service", "murphy")]["spec"]["ports"]}
    container = by[("Deployment", "murphy")]["spec"]["template"]["spec"]["containers"][0]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"api": 8080, "s3-gateway": 8081}
    assert svc_ports["s3-gateway"]["port"] == 8081 and svc_ports["s3-gateway"]["targetPort"] == "s3-gateway"
    url = by[("ConfigMap", "murphy-config")]["data"]["MURPHY_KUBERNETES_S3_GATEWAY_URL"]
    assert url == f"http://murphy.murphy.svc.cluster.local:{svc_ports['s3-gateway']['port']}" == DEFAULT_S3_ENDPOINT
    egress = by[("NetworkPolicy", "murphy-workloads")]["spec"]["egress"]
    to_murphy = [r for r in egress if any((t.get("namespaceSelector") or {}).get("matchLabels", {}).get(
        "kubernetes.io/metadata.name") == "murphy" for t in r.get("to", []))]
    assert len(to_murphy) == 1  # murphy's own pods, on the gateway's port only: not its API, not S3
    assert to_murphy[0]["to"][0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "murphy"}
    assert to_murphy[0]["ports"] == [{"protocol": "TCP", "port": 8081}]
    ports = {p.get("port") for r in egress for p in r.get("ports", [])}
    assert ports == {8081, 53} and all("ipBlock" not in t for r in egress for t in r.get("to", []))
    # The pods' endpoint, as render prints it, is that gateway.
    objs = list(yaml.safe_load_all(render("--request", str(REQUESTS[0])).stdout))
    for job in (o for o in objs if o["kind"] == "Job"):
        env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["AWS_ENDPOINT_URL_S3"] == env["MURPHY_S3_ENDPOINT_URL"] == url


@pytest.mark.parametrize(("body", "message"), [
    ({"TrainingJobName": "bad name!"}, "ValidationException: "),
    ({**json.loads(REQUESTS[0].read_text()), "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 0,
                                                                  "VolumeSizeInGB": 1}}, "ValidationException: "),
    ({**json.loads(REQUESTS[0].read_text()), "ResourceConfig": {"InstanceType": "ml.nope.xlarge", "InstanceCount": 1,
                                                                  "VolumeSizeInGB": 1}}, "ml.nope.xlarge"),
    ([1, 2], "holds no CreateTrainingJob request object"),
    ("{not json", "cannot read"),
])
def test_bad_requests_are_refused_with_the_apis_message(body: Any, message: str, tmp_path: Path) -> None:
    f = tmp_path / "req.json"
    f.write_text(body if isinstance(body, str) else json.dumps(body))
    proc = render("--request", str(f))
    assert proc.returncode == 2 and proc.stdout == ""
    assert message in proc.stderr, proc.stderr


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_kustomize_builds_offline_and_validates(kustomization: str, tmp_path: Path, validator: tuple[str, list[str]]) -> None:
    proc = subprocess.run([kubectl(), "kustomize", str(REPO / kustomization)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    objs = list(yaml.safe_load_all(proc.stdout))
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert {("Namespace", "murphy"), ("Namespace", "murphy-jobs"), ("Role", "murphy-runtime"), ("Deployment", "murphy"),
            ("Service", "murphy"), ("NetworkPolicy", "murphy-workloads")} <= kinds
    if kustomization.endswith("local"):
        assert {("StatefulSet", "murphy-db"), ("StatefulSet", "murphy-s3")} <= kinds
    for o in objs:
        pod = o.get("spec", {}).get("template", {}).get("spec")
        if pod:  # every pod of the deployment runs locked down, as job pods do
            assert pod["securityContext"]["runAsNonRoot"] is True
            for c in pod["containers"]:
                assert c["securityContext"]["allowPrivilegeEscalation"] is False
                assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    out = tmp_path / "build.yaml"
    out.write_text(proc.stdout)
    validate(validator, out)


def test_the_role_grants_what_the_objects_need_and_no_more() -> None:
    role = yaml.safe_load((REPO / "infra" / "kubernetes" / "base" / "rbac.yaml").read_text().split("\n---\n")[0])
    granted = {(g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    proc = render("--request", str(REQUESTS[1]))  # two hosts: every kind render makes
    kinds = {o["kind"] for o in yaml.safe_load_all(proc.stdout)}
    resource = {"ConfigMap": ("", "configmaps"), "Secret": ("", "secrets"), "Service": ("", "services"), "Job": ("batch", "jobs")}
    for kind in kinds:
        assert {"create", "get", "delete"} <= granted[resource[kind]], kind
    assert all("*" not in verbs for verbs in granted.values()) and ("", "nodes") not in granted
    assert role["kind"] == "Role"  # namespaced: never a ClusterRole


def test_the_validator_is_strict(tmp_path: Path, validator: tuple[str, list[str]]) -> None:
    proc = render("--request", str(REQUESTS[0]))
    bad = tmp_path / "typo.yaml"
    bad.write_text(proc.stdout.replace("backoffLimit:", "backofLimit:", 1))
    exe, versions = validator
    res = subprocess.run([exe, "--strict", "--quiet", "-k", versions[0], str(bad)], capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and "backofLimit" in res.stdout + res.stderr
