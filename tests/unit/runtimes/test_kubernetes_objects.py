"""The objects of one training job (murphy.runtimes.kubernetes_objects), built from plans with no cluster."""

from __future__ import annotations

import json
from typing import Any

import pytest

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes import kubernetes_names as kn
from murphy.runtimes import kubernetes_objects as ko
from murphy.runtimes.base import Channel, RulePlan, TrainingPlan
from murphy.runtimes.kubernetes_resources import GPU_RESOURCE, GPU_TOLERATION, InstanceProfile

OPTS = ko.KubernetesOptions(namespace="team-a", runtime_id="rid", s3_endpoint_url="http://s3.team-a:8333")
SECRET_VALUE = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def training(itype: str = "ml.m5.xlarge", hosts: int = 1, image: str = "murphy/pytorch-cpu:latest") -> TrainingPlan:
    return TrainingPlan(
        container_name="Job-1-training", job_name="Job-1", image=image,
        hyperparameters={"sagemaker_program": '"train.py"', "lr": "0.1"}, environment={"MY_VAR": "x"},
        instance_type=itype, instance_count=hosts, account="111122223333", region="eu-west-1",
        channels=(Channel("train", "s3://b/data"),), debug_hook_config={"S3OutputPath": "s3://b/debug", "LocalPath": "/opt/ml/output/my-tensors"},
        tensor_uri="s3://b/debug/Job-1/debug-output", output_uri="s3://b/out/Job-1/output", max_runtime_s=3600)


def rule(i: int = 0, itype: str | None = None) -> RulePlan:
    return RulePlan(container_name=f"Job-1-rule-{i}", job_name="Job-1", rule_name=f"Rule{i}",
                    image="123.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-debugger-rules:latest",
                    rule_parameters={"rule_to_invoke": "LossNotDecreasing"}, base_trial_uri="s3://b/debug/Job-1/debug-output",
                    result_uri=f"s3://b/debug/Job-1/rule-output/Rule{i}", environment={"MURPHY_POLL_INTERVAL": "0.1"},
                    instance_type=itype, account="111122223333", region="eu-west-1")


def objects(plan: TrainingPlan | None = None, rules: int = 2, opts: ko.KubernetesOptions = OPTS) -> list[dict[str, Any]]:
    return ko.job_objects(plan or training(), [rule(i) for i in range(rules)], opts,
                          {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": SECRET_VALUE, "HOME": "/root"})


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def pods(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o["spec"]["template"]["spec"] for o in by_kind(objs, "Job")]


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


def test_one_host_layout_in_creation_order() -> None:
    objs = objects()
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("ConfigMap", kn.config_map_name("rid", training())), ("Secret", kn.secret_name("rid", training())),
        ("Job", kn.training_name("rid", training())),
        ("Secret", kn.rule_secret_name("rid", rule(0))), ("Job", kn.rule_job_name("rid", rule(0))),
        ("Secret", kn.rule_secret_name("rid", rule(1))), ("Job", kn.rule_job_name("rid", rule(1)))]
    job = objs[2]["spec"]
    assert (job["completions"], job["parallelism"], job["completionMode"]) == (1, 1, "Indexed")
    assert "subdomain" not in job["template"]["spec"]


def test_several_hosts_get_an_indexed_job_and_a_headless_service() -> None:
    objs = objects(training(hosts=3), rules=0)
    assert [o["kind"] for o in objs] == ["ConfigMap", "Secret", "Service", "Job"]
    svc, job = objs[2], objs[3]
    assert svc["metadata"]["name"] == job["metadata"]["name"]
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert svc["spec"]["selector"][kn.ROLE] == "training"
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (3, 3)
    assert job["spec"]["template"]["spec"]["subdomain"] == svc["metadata"]["name"]


def test_every_object_is_namespaced_labelled_and_hashed() -> None:
    objs = objects()
    for o in objs:
        meta = o["metadata"]
        assert meta["namespace"] == "team-a"
        assert kn.job_selector("rid", training()).items() <= meta["labels"].items()
        assert meta["annotations"][kn.SPEC_HASH] == kn.spec_hash(o)
        assert meta["annotations"][kn.JOB_NAME] == "Job-1"
        assert "ownerReferences" not in meta
    roles = [o["metadata"]["labels"][kn.ROLE] for o in objs]
    assert roles == ["config", "config", "training", "config", "rule", "config", "rule"]
    for job in by_kind(objs, "Job"):
        assert job["spec"]["template"]["metadata"]["labels"] == job["metadata"]["labels"]
    assert objects() == objs  # deterministic: the same plans give the same objects, hashes included


def test_owner_reference_to_the_anchor_leaves_the_hash() -> None:
    objs = objects()
    anchor, job = objs[0], objs[2]
    h = job["metadata"]["annotations"][kn.SPEC_HASH]
    ko.owned_by(job, anchor, "0c4e-uid")
    assert job["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "ConfigMap", "name": anchor["metadata"]["name"],
                                                   "uid": "0c4e-uid", "blockOwnerDeletion": True, "controller": False}]
    assert kn.spec_hash(job) == h


def test_pods_are_locked_down_like_docker_containers() -> None:
    for pod in pods(objects()):
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False and pod["enableServiceLinks"] is False
        assert pod["serviceAccountName"] == "murphy-workload" and pod["restartPolicy"] == "Never"
        assert pod["terminationGracePeriodSeconds"] == 120
        for c in [*pod.get("initContainers", []), *pod["containers"]]:
            assert c["securityContext"] == {"allowPrivilegeEscalation": False, "privileged": False,
                                            "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                                            "capabilities": {"drop": ["ALL"]}}
            mounts = {m["mountPath"] for m in c["volumeMounts"]}
            assert "/tmp" in mounts or c["name"] == "murphy-init"


def test_credentials_only_in_the_secrets_one_per_pod_role() -> None:
    objs = objects()
    secrets = by_kind(objs, "Secret")
    assert len(secrets) == 3  # the training hosts', each rule's
    for secret in secrets:
        assert secret["stringData"] == {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": SECRET_VALUE,
                                        "AWS_REGION": "eu-west-1"}
    for o in objs:
        if o["kind"] != "Secret":
            assert SECRET_VALUE not in json.dumps(o)
    for pod, secret in zip(pods(objs), secrets, strict=True):
        c = pod["containers"][0]
        assert c["envFrom"] == [{"secretRef": {"name": secret["metadata"]["name"]}}]
        assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "HOME"} & env_of(c).keys()
        assert env_of(c)["AWS_ENDPOINT_URL_S3"] == OPTS.s3_endpoint_url


def test_by_default_the_secrets_hold_placeholders_and_the_pods_reach_the_gateway() -> None:
    objs = ko.job_objects(training(), [rule(0)], ko.KubernetesOptions(namespace="team-a", runtime_id="rid"))
    for secret in by_kind(objs, "Secret"):
        assert secret["stringData"] == {**ko.PLACEHOLDER_CREDENTIALS, "AWS_REGION": "eu-west-1"}
        assert kn.S3_ACCESS_KEY_ID not in secret["metadata"]["annotations"]
    for pod in pods(objs):
        assert env_of(pod["containers"][0])["AWS_ENDPOINT_URL_S3"] == "http://murphy.murphy.svc.cluster.local:8081"


def test_an_issued_key_s_id_is_annotated_on_its_secret() -> None:
    obj = ko.secret(rule(0), {"AWS_ACCESS_KEY_ID": "ASIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": SECRET_VALUE,
                              "AWS_SESSION_TOKEN": "tok", "HOME": "/root"}, OPTS, access_key_id="ASIAEXAMPLE")
    assert obj["metadata"]["name"] == kn.rule_secret_name("rid", rule(0))
    assert obj["metadata"]["annotations"][kn.S3_ACCESS_KEY_ID] == "ASIAEXAMPLE"
    assert set(obj["stringData"]) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"}


def test_the_config_map_holds_the_docker_runtimes_config_files() -> None:
    cm = objects()[0]
    assert cm["immutable"] is True
    files = cm["data"]
    assert set(files) == {"hyperparameters.json", "resourceconfig.json", "inputdataconfig.json", "debughookconfig.json", "murphy.json"}
    assert json.loads(files["hyperparameters.json"]) == {"sagemaker_program": '"train.py"', "lr": "0.1"}
    assert json.loads(files["debughookconfig.json"])["LocalPath"] == "/opt/ml/output/my-tensors"
    assert json.loads(files["resourceconfig.json"])["hosts"] == ["algo-1"]
    murphy = json.loads(files["murphy.json"])
    assert (murphy["kind"], murphy["tensor_uri"], murphy["local_path"]) == ("script-mode", "s3://b/debug/Job-1/debug-output",
                                                                            "/opt/ml/output/my-tensors")


def test_training_container() -> None:
    objs = objects(training("ml.g5.2xlarge", image="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.1.0-gpu-py310"))
    job = by_kind(objs, "Job")[0]
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert spec["backoffLimit"] == 0 and spec["podReplacementPolicy"] == "Failed"
    assert spec["podFailurePolicy"]["rules"][1]["onExitCodes"] == {"containerName": "algo", "operator": "NotIn", "values": [0]}
    assert spec["activeDeadlineSeconds"] == 3600 + OPTS.startup_budget_s
    algo = pod["containers"][0]
    assert algo["image"] == "murphy/pytorch-gpu:latest"  # the catalog's image for AWS's GPU image
    assert algo["terminationMessagePath"] == "/opt/ml/output/failure"
    assert algo["resources"]["limits"][GPU_RESOURCE] == "1" and pod["tolerations"] == [GPU_TOLERATION]
    env = env_of(algo)
    assert env["MY_VAR"] == "x" and env["SM_CURRENT_HOST"] == "algo-1" and env["SM_NUM_GPUS"] == "1"
    assert env["SM_NUM_CPUS"] == "7" and env["MURPHY_OPT_ML"] == "/opt/ml"
    assert env["MURPHY_S3_ENDPOINT_URL"] == env["AWS_ENDPOINT_URL_S3"] == "http://s3.team-a:8333"
    assert env["SMDEBUG_CONFIG_FILE_PATH"] == "/opt/ml/input/config/debughookconfig.json"
    init = pod["initContainers"][0]
    script = init["command"][2]
    assert init["command"][:2] == ["sh", "-c"] and init["image"] == OPTS.utility_image
    assert "/opt/ml/output/my-tensors" in script and "/opt/ml/model" in script
    assert script.endswith("cp /murphy/config/*.json /opt/ml/input/config/")
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["config"] == {"name": "config", "configMap": {"name": objs[0]["metadata"]["name"]}}
    assert vols["dshm"]["emptyDir"]["medium"] == "Memory"
    assert {m["mountPath"] for m in algo["volumeMounts"]} == {"/opt/ml", "/run/murphy", "/tmp", "/dev/shm"}


def test_rule_jobs() -> None:
    objs = ko.job_objects(training(), [rule(0, "ml.m5.large"), rule(1)], OPTS)
    r0, r1 = by_kind(objs, "Job")[1:]
    assert r0["metadata"]["annotations"][kn.RULE_NAME] == "Rule0"
    spec = r0["spec"]
    assert spec["backoffLimit"] == 1
    assert spec["podFailurePolicy"]["rules"][0] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert spec["activeDeadlineSeconds"] == 3600 + OPTS.startup_budget_s + OPTS.rule_grace_s
    c0 = spec["template"]["spec"]["containers"][0]
    c1 = r1["spec"]["template"]["spec"]["containers"][0]
    assert c0["image"] == "murphy/rule-evaluator:latest"
    assert c0["resources"]["requests"]["cpu"] == "1500m" and c1["resources"]["requests"]["cpu"] == "3500m"
    env = env_of(c0)
    assert json.loads(env["MURPHY_RULE_PARAMETERS"]) == {"rule_to_invoke": "LossNotDecreasing"}
    assert (env["MURPHY_RULE_NAME"], env["MURPHY_BASE_TRIAL"]) == ("Rule0", "s3://b/debug/Job-1/debug-output")
    assert env["MURPHY_RESULT_PATH"] == "s3://b/debug/Job-1/rule-output/Rule0" and env["MURPHY_POLL_INTERVAL"] == "0.1"
    assert "initContainers" not in spec["template"]["spec"]


def test_profiles_place_pods() -> None:
    opts = ko.KubernetesOptions(profiles=(InstanceProfile("ml.m5.*", {"pool": "cpu"}),))
    for pod in pods(ko.job_objects(training(), [rule(0)], opts)):
        assert pod["nodeSelector"] == {"pool": "cpu"} and "tolerations" not in pod


def test_images_must_fit_their_role() -> None:
    with pytest.raises(RuntimeBackendError, match="is a rule evaluator; it cannot run a training job"):
        ko.job_objects(training(image="murphy/rule-evaluator:latest"), [], OPTS)
    bad_rule = RulePlan(container_name="Job-1-rule-0", job_name="Job-1", rule_name="R", image="murphy/pytorch-cpu:latest",
                        rule_parameters={}, base_trial_uri="s3://b/d", result_uri="s3://b/r")
    with pytest.raises(RuntimeBackendError, match="is a training image; it cannot evaluate rules"):
        ko.job_objects(training(), [bad_rule], OPTS)
    # an image the catalog does not know runs as it is
    own = by_kind(ko.job_objects(training(image="registry.example/own:1"), [], OPTS), "Job")[0]
    assert own["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example/own:1"


@pytest.mark.parametrize(("opts", "message"), [
    (ko.KubernetesOptions(namespace="Team_A"), "namespace 'Team_A' is not a DNS-1123 label"),
    (ko.KubernetesOptions(namespace="x" * 64), "is not a DNS-1123 label"),
    (ko.KubernetesOptions(runtime_id="prod a"), "runtime id 'prod a' is not a label value"),
    (ko.KubernetesOptions(runtime_id=""), "runtime id '' is not a label value"),
    (ko.KubernetesOptions(service_account="Workload"), "service account 'Workload'"),
])
def test_options_that_make_invalid_objects_are_refused(opts: ko.KubernetesOptions, message: str) -> None:
    with pytest.raises(RuntimeBackendError, match=message):
        ko.job_objects(training(), [], opts)


def test_config_files_too_large_for_a_config_map_are_refused() -> None:
    big = TrainingPlan(container_name="J-training", job_name="J", image="murphy/pytorch-cpu:latest",
                       hyperparameters={f"h{i}": "x" * 2500 for i in range(100)}, environment={},
                       instance_type="ml.m5.xlarge", instance_count=1)
    assert ko.job_objects(big, [], OPTS)  # SageMaker's own limits (100 x 2500 characters) fit
    huge = TrainingPlan(container_name="J-training", job_name="J", image="murphy/pytorch-cpu:latest",
                        hyperparameters={"h": "x" * 1_100_000}, environment={}, instance_type="ml.m5.xlarge", instance_count=1)
    with pytest.raises(RuntimeBackendError, match=r"a ConfigMap holds at most 1000000"):
        ko.job_objects(huge, [], OPTS)
