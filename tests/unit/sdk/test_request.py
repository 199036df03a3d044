"""The CreateTrainingJob body murphy.sdk builds, against the stock SDK's observed body.

The reference is section d.2 of shared/reference/sagemaker-api.md (sagemaker 2.257.7, generic
Estimator with ``rules=[Rule.sagemaker(rule_configs.exploding_tensor())]``). Building a request
makes no API call; only uploads (script mode, custom rule sources) touch storage, which
``MURPHY_S3_LOCAL_ROOT`` points at a temporary directory.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

import pytest

from murphy.sdk import (
    CollectionConfig,
    DebuggerHookConfig,
    Estimator,
    PyTorch,
    Rule,
    Session,
    rule_configs,
)
from murphy.sdk.estimator import name_from_base, sagemaker_timestamp

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "murphy/linear-regression-demo:latest"
UNREACHABLE = "http://127.0.0.1:9"  # nothing may be sent while building a request
RULES_US_WEST_2 = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"


@pytest.fixture
def buckets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MURPHY_S3_LOCAL_ROOT", str(tmp_path / "buckets"))
    monkeypatch.delenv("MURPHY_DEFAULT_BUCKET", raising=False)
    return tmp_path / "buckets"


def session(region: str = "us-west-2", default_bucket: str | None = None) -> Session:
    return Session(endpoint=UNREACHABLE, region=region, default_bucket=default_bucket)


def test_generic_estimator_matches_the_stock_sdk_body() -> None:
    estimator = Estimator(
        image_uri=IMAGE, role=ROLE, output_path="s3://bucket/",
        hyperparameters={"lr": 100, "scale": 100000000000.0, "steps": 10, "debug_frequency": 1},
        rules=[Rule.sagemaker(rule_configs.exploding_tensor())], sagemaker_session=session(),
    )
    body = estimator.training_request(job_name="job")
    assert body == {
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": IMAGE},
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/"}, "TrainingJobName": "job",
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "ResourceConfig": {"VolumeSizeInGB": 30, "InstanceCount": 1, "InstanceType": "ml.m5.xlarge"},
        "RoleArn": ROLE,
        "HyperParameters": {"lr": "100", "scale": "100000000000.0", "steps": "10", "debug_frequency": "1"},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "ExplodingTensor", "RuleEvaluatorImage": RULES_US_WEST_2,
                                     "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}],
        "DebugHookConfig": {"S3OutputPath": "s3://bucket/", "CollectionConfigurations": []},
        "ProfilerConfig": {"S3OutputPath": "s3://bucket/", "DisableProfiler": False},
    }
    assert estimator.latest_job_debugger_artifacts_path() == "s3://bucket/job/debug-output"


def test_a_container_entry_point_and_arguments_go_into_the_algorithm_specification() -> None:
    """SageMaker 2.x's ``container_entry_point``/``container_arguments`` (how SDK 3.x's script
    mode runs: bash on the sm_drivers channel's sm_train.sh)."""
    arguments = ["-c", "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && /opt/ml/input/data/sm_drivers/sm_train.sh"]
    estimator = Estimator(image_uri=IMAGE, role=ROLE, output_path="s3://bucket/", sagemaker_session=session(),
                          container_entry_point=("/bin/bash",), container_arguments=arguments)
    body = estimator.training_request({"code": "s3://bucket/code", "sm_drivers": "s3://bucket/drivers"}, job_name="job")
    assert body["AlgorithmSpecification"] == {"TrainingInputMode": "File", "TrainingImage": IMAGE,
                                              "ContainerEntrypoint": ["/bin/bash"], "ContainerArguments": arguments}
    assert [c["ChannelName"] for c in body["InputDataConfig"]] == ["code", "sm_drivers"]
    plain = Estimator(image_uri=IMAGE, role=ROLE, output_path="s3://bucket/", sagemaker_session=session())
    assert set(plain.training_request(job_name="job")["AlgorithmSpecification"]) == {"TrainingInputMode", "TrainingImage"}


def test_script_mode_uploads_the_entry_point_and_json_encodes_the_sdk_hyperparameters(buckets: Path, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    estimator = Estimator(entry_point=str(script), image_uri=IMAGE, role=ROLE, output_path="s3://bucket/prefix",
                          hyperparameters={"lr": 0.1, "optimizer": "adam"}, sagemaker_session=session())
    body = estimator.training_request(job_name="job-1")
    code = "s3://bucket/job-1/source/sourcedir.tar.gz"  # the SDK ignores output_path's prefix here
    assert body["HyperParameters"] == {
        # without source_dir the generic Estimator keeps the user's values as str()
        "lr": "0.1", "optimizer": "adam",
        "sagemaker_submit_directory": json.dumps(code), "sagemaker_program": '"train.py"',
        "sagemaker_container_log_level": "20", "sagemaker_job_name": '"job-1"', "sagemaker_region": '"us-west-2"',
    }
    with tarfile.open(fileobj=io.BytesIO((buckets / "bucket/job-1/source/sourcedir.tar.gz").read_bytes())) as tar:
        assert tar.getnames() == ["train.py"]


def test_source_dir_is_tarred_whole_and_user_hyperparameters_are_json(buckets: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "train.py").write_text("import pkg\n")
    (src / "pkg" / "__init__.py").write_text("")
    estimator = Estimator(entry_point="train.py", source_dir=str(src), image_uri=IMAGE, output_path="s3://b/",
                          hyperparameters={"lr": 0.1, "optimizer": "adam", "nesterov": True}, sagemaker_session=session())
    hps = estimator.training_request(job_name="j")["HyperParameters"]
    assert (hps["lr"], hps["optimizer"], hps["nesterov"]) == ("0.1", '"adam"', "true")
    assert hps["sagemaker_program"] == '"train.py"'
    with tarfile.open(fileobj=io.BytesIO((buckets / "b/j/source/sourcedir.tar.gz").read_bytes())) as tar:
        assert sorted(tar.getnames()) == ["pkg", "pkg/__init__.py", "train.py"]


def test_missing_entry_point_in_source_dir_is_refused(tmp_path: Path) -> None:
    estimator = Estimator(entry_point="nope.py", source_dir=str(tmp_path), image_uri=IMAGE, output_path="s3://b/",
                          sagemaker_session=session())
    with pytest.raises(ValueError, match=r'No file named "nope\.py"'):
        estimator.training_request(job_name="j")


def test_pytorch_image_metrics_flag_and_encoding(buckets: Path, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    estimator = PyTorch(entry_point=str(script), framework_version="2.1", py_version="py310", role=ROLE,
                        output_path="s3://b/", hyperparameters={"lr": 100, "opt": "adam"}, sagemaker_session=session())
    body = estimator.training_request(job_name="j")
    assert body["AlgorithmSpecification"] == {
        "TrainingInputMode": "File", "EnableSageMakerMetricsTimeSeries": True,
        "TrainingImage": "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310",
    }
    assert body["HyperParameters"]["lr"] == "100" and body["HyperParameters"]["opt"] == '"adam"'
    assert body["HyperParameters"]["sagemaker_container_log_level"] == "20"
    gpu = PyTorch(entry_point=str(script), framework_version="2.5", instance_type="ml.p3.2xlarge",
                  sagemaker_session=session("cn-north-1"))
    assert gpu.training_image_uri() == "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/pytorch-training:2.5-gpu-py311"
    assert re.fullmatch(r"pytorch-training-\d{4}(-\d{2}){5}-\d{3}", name_from_base("pytorch-training"))


def test_rules_collections_merge_into_the_hook_config_without_touching_the_users_objects() -> None:
    hook = DebuggerHookConfig(collection_configs=[CollectionConfig("losses", {"save_interval": "10"}),
                                                  CollectionConfig("gradients", {"save_interval": "500"})])
    rules = [Rule.sagemaker(rule_configs.vanishing_gradient()), Rule.sagemaker(rule_configs.exploding_tensor())]
    estimator = Estimator(image_uri=IMAGE, output_path="s3://b/out", rules=rules, debugger_hook_config=hook,
                          sagemaker_session=session())
    body = estimator.training_request(job_name="j")
    assert body["DebugHookConfig"] == {"S3OutputPath": "s3://b/out", "CollectionConfigurations": [
        {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}},
        {"CollectionName": "losses", "CollectionParameters": {"save_interval": "10"}},
    ]}
    assert hook.s3_output_path is None and len(hook.collection_configs or []) == 2
    assert rules[0].image_uri == "DEFAULT_RULE_EVALUATOR_IMAGE"
    assert estimator.latest_job_debugger_artifacts_path() == "s3://b/out/j/debug-output"


def test_rule_parameters_override_defaults_and_rule_to_invoke_is_refused() -> None:
    rule = Rule.sagemaker(rule_configs.exploding_tensor(), name="Nan", rule_parameters={"only_nan": "True"},
                          other_trials_s3_input_paths=["s3://b/other"])
    assert rule.name == "Nan"
    assert rule.rule_parameters == {"other_trial_0": "s3://b/other", "rule_to_invoke": "ExplodingTensor", "only_nan": "True"}
    with pytest.raises(RuntimeError, match="rule_to_invoke"):
        Rule.sagemaker(rule_configs.exploding_tensor(), rule_parameters={"rule_to_invoke": "X"})


def test_actions_become_action_json_with_the_job_name_as_stop_prefix() -> None:
    actions = rule_configs.ActionList(rule_configs.StopTraining(), rule_configs.Email("a@b.co"))
    estimator = Estimator(image_uri=IMAGE, output_path="s3://b/", sagemaker_session=session(),
                          rules=[Rule.sagemaker(rule_configs.exploding_tensor(), actions=actions)])
    params = estimator.training_request(job_name="job-7")["DebugRuleConfigurations"][0]["RuleParameters"]
    assert params["action_json"] == (
        '[{\\"name\\": \\"stoptraining\\", \\"training_job_prefix\\": \\"job-7\\"}, '
        '{\\"endpoint\\": \\"a@b.co\\", \\"name\\": \\"email\\"}]'
    )


def test_custom_rule_source_is_uploaded_and_the_evaluator_image_follows_the_region(buckets: Path, tmp_path: Path) -> None:
    source = tmp_path / "my_rule.py"
    source.write_text("class Mine: ...\n")
    rule = Rule.custom(name="Mine", image_uri=None, instance_type="ml.t3.medium", volume_size_in_gb=30,
                       source=str(source), rule_to_invoke="Mine", rule_parameters={"threshold": "20.0"},
                       collections_to_save=[CollectionConfig("gradients")])
    estimator = Estimator(image_uri=IMAGE, output_path="s3://out/", rules=[rule],
                          sagemaker_session=session("us-east-1", default_bucket="rules-bucket"))
    body = estimator.training_request(job_name="j")
    config = body["DebugRuleConfigurations"][0]
    uri = config["RuleParameters"].pop("source_s3_uri")
    m = re.fullmatch(r"s3://rules-bucket/Mine/[0-9a-f-]{36}/my_rule.py", uri)
    assert m, uri
    assert (buckets / uri.removeprefix("s3://")).read_text() == "class Mine: ...\n"
    assert config == {"RuleConfigurationName": "Mine", "InstanceType": "ml.t3.medium", "VolumeSizeInGB": 30,
                      "RuleEvaluatorImage": "864354269164.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rule-evaluator:latest",
                      "RuleParameters": {"rule_to_invoke": "Mine", "threshold": "20.0"}}
    assert body["DebugHookConfig"]["CollectionConfigurations"] == [{"CollectionName": "gradients"}]
    with pytest.raises(ValueError, match="rule to invoke"):
        Rule.custom(name="X", image_uri="img", instance_type="ml.t3.medium", volume_size_in_gb=30, source=str(source))


def test_builtin_rule_image_by_region_with_a_fallback() -> None:
    def image(region: str) -> str:
        est = Estimator(image_uri=IMAGE, output_path="s3://b/", sagemaker_session=session(region),
                        rules=[Rule.sagemaker(rule_configs.exploding_tensor())])
        return str(est.training_request(job_name="j")["DebugRuleConfigurations"][0]["RuleEvaluatorImage"])

    assert image("us-east-1") == "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"
    assert image("xx-nowhere-1") == "murphy/rule-evaluator:latest"  # the SDK raises here


def test_job_names_and_options() -> None:
    estimator = Estimator(image_uri="123.dkr.ecr.us-west-2.amazonaws.com/some/repo:tag", output_path="s3://b/",
                          sagemaker_session=session(), debugger_hook_config=False, disable_profiler=True,
                          environment={"A": "1"})
    body = estimator.training_request(inputs={"train": "s3://b/data"})
    assert re.fullmatch(r"repo-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-\d{3}", body["TrainingJobName"])
    assert "DebugHookConfig" not in body and "HyperParameters" not in body
    assert body["ProfilerConfig"] == {"DisableProfiler": True}
    assert body["Environment"] == {"A": "1"}
    assert body["InputDataConfig"] == [{"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://b/data"}},
                                        "ChannelName": "train"}]
    assert estimator.latest_job_debugger_artifacts_path() is None
    long = name_from_base("x" * 80)
    assert len(long) == 63 and long.startswith("x" * 39 + "-")
    assert re.fullmatch(r"2001-09-09-01-46-40-123", sagemaker_timestamp(1_000_000_000.1234))


def test_a_bare_role_name_becomes_an_arn() -> None:
    est = Estimator(image_uri=IMAGE, role="SageMakerRole", output_path="s3://b/", sagemaker_session=session())
    assert est.training_request(job_name="j")["RoleArn"] == "arn:aws:iam::123456789012:role/SageMakerRole"


def test_a_real_server_needs_an_output_location(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MURPHY_DEFAULT_BUCKET", raising=False)
    estimator = Estimator(image_uri=IMAGE, sagemaker_session=session())
    with pytest.raises(ValueError, match="output_path"):
        estimator.training_request(job_name="j")
    monkeypatch.setenv("MURPHY_DEFAULT_BUCKET", "team-bucket")
    assert Estimator(image_uri=IMAGE, sagemaker_session=session()).training_request(job_name="j")[
        "OutputDataConfig"] == {"S3OutputPath": "s3://team-bucket/"}
