"""Names, labels, annotations and spec hashes of the Kubernetes objects (murphy.runtimes.kubernetes_names)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from murphy.runtimes import kubernetes_names as kn
from murphy.runtimes.base import RulePlan, TrainingPlan

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
#: SageMaker's TrainingJobName pattern and its 63-character limit.
JOB_NAMES = st.from_regex(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", fullmatch=True)


def training(name: str = "j", account: str = "111122223333", region: str = "eu-west-1") -> TrainingPlan:
    return TrainingPlan(container_name=f"{name}-training", job_name=name, image="img", hyperparameters={},
                        environment={}, instance_type="ml.m5.xlarge", instance_count=1, account=account, region=region)


def rule(job: str = "j", name: str = "ExplodingTensor") -> RulePlan:
    return RulePlan(container_name=f"{job}-rule-0", job_name=job, rule_name=name, image="r", rule_parameters={},
                    base_trial_uri="s3://b/d", result_uri="s3://b/r", account="111122223333", region="eu-west-1")


def all_names(rid: str, t: TrainingPlan, r: RulePlan) -> list[str]:
    return [kn.training_name(rid, t), kn.config_map_name(rid, t), kn.secret_name(rid, t), kn.rule_job_name(rid, r)]


@given(JOB_NAMES, st.text(min_size=1, max_size=300))
def test_every_name_is_a_dns1123_label_within_the_limit(job: str, rule_name: str) -> None:
    for name in all_names("rid", training(job), rule(job, rule_name)):
        assert len(name) <= kn.MAX_NAME
        assert DNS1123_LABEL.fullmatch(name), name


def test_names_are_readable_and_deterministic() -> None:
    t, r = training("Resnet50-NaN-Watch"), rule("Resnet50-NaN-Watch", "LossNotDecreasing")
    assert re.fullmatch(r"mt-resnet50-nan-watch-[0-9a-f]{8}", kn.training_name("a", t))
    assert kn.config_map_name("a", t) == kn.training_name("a", t) + "-cfg"
    assert kn.secret_name("a", t) == kn.training_name("a", t) + "-s3"
    assert re.fullmatch(r"mr-resnet50-nan-watch-lossnotdecreasing-[0-9a-f]{8}", kn.rule_job_name("a", r))
    assert all_names("a", t, r) == all_names("a", training("Resnet50-NaN-Watch"), rule("Resnet50-NaN-Watch", "LossNotDecreasing"))


def test_long_names_are_cut_and_keep_the_hash() -> None:
    t = training("a" * 63)
    name = kn.training_name("rid", t)
    assert len(name) == kn.MAX_NAME and name.endswith("-" + kn.job_key("rid", t))
    # the slug never ends in "-" before the hash, however the cut falls
    assert "--" not in kn.training_name("rid", training("ab-" * 21))


@pytest.mark.parametrize("other", [
    training("Job"),  # case: SageMaker names are case-sensitive, DNS names are not
    training("j", account="999999999999"), training("j", region="us-east-1"),
])
def test_jobs_that_differ_get_different_names(other: TrainingPlan) -> None:
    assert kn.training_name("rid", other) != kn.training_name("rid", training("j"))


def test_installations_and_rules_get_different_names() -> None:
    assert kn.training_name("one", training()) != kn.training_name("two", training())
    # two rules whose slugs collide (case, punctuation) still differ by their hash
    assert kn.rule_job_name("rid", rule(name="Loss.A")) != kn.rule_job_name("rid", rule(name="loss-a"))


def test_labels_select_the_job_and_carry_the_role() -> None:
    t, r = training("My-Job"), rule("My-Job", "a rule, with spaces & more " * 5)
    tl, rl, cl = kn.object_labels("rid", t), kn.object_labels("rid", r), kn.object_labels("rid", t, role="config")
    for labels in (tl, rl, cl):
        assert labels[kn.MANAGED_BY] == "murphy" and labels[kn.RUNTIME_ID] == "rid"
        assert labels[kn.JOB_KEY] == kn.job_key("rid", t) == kn.job_key("rid", r)
        assert kn.job_selector("rid", t).items() <= labels.items()
        assert all(len(v) <= kn.MAX_LABEL_VALUE and LABEL_VALUE.fullmatch(v) for v in labels.values()), labels
    assert (tl[kn.ROLE], tl[kn.COMPONENT]) == ("training", "training")
    assert (rl[kn.ROLE], rl[kn.COMPONENT], rl[kn.RULE_KEY]) == ("rule", "rule-evaluator", kn.rule_key("rid", r))
    assert (cl[kn.ROLE], kn.RULE_KEY in tl) == ("config", False)
    assert tl[kn.JOB] == "My-Job"


def test_annotations_keep_the_exact_names() -> None:
    long_rule = "Vanishing gradient: a name no label could hold " * 3
    a = kn.object_annotations(rule("My-Job", long_rule))
    assert a[kn.RULE_NAME] == long_rule and a[kn.JOB_NAME] == "My-Job"
    assert a[kn.CONTAINER_NAME] == "My-Job-rule-0" and a[kn.ACCOUNT] == "111122223333" and a[kn.REGION] == "eu-west-1"
    assert kn.CONTAINER_NAME not in kn.object_annotations(training(), role="config")


@pytest.mark.parametrize(("text", "value"), [
    ("ok-Value_1.2", "ok-Value_1.2"), ("  spaces & stuff!", "spaces-stuff"), ("-x-", "x"), ("x" * 80, "x" * 63), ("!!", ""),
])
def test_label_value(text: str, value: str) -> None:
    assert kn.label_value(text) == value


def test_spec_hash_ignores_itself_and_owner_references_but_nothing_else() -> None:
    obj = {"kind": "Job", "metadata": {"name": "n", "annotations": {"x": "1"}}, "spec": {"a": [1, 2]}}
    h = kn.spec_hash(obj)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", h)
    hashed = kn.with_spec_hash(dict(obj, metadata={**obj["metadata"], "annotations": {"x": "1"}}))  # type: ignore[dict-item]
    assert hashed["metadata"]["annotations"][kn.SPEC_HASH] == h == kn.spec_hash(hashed)
    hashed["metadata"]["ownerReferences"] = [{"uid": "u"}]
    assert kn.spec_hash(hashed) == h
    assert kn.spec_hash({**obj, "spec": {"a": [2, 1]}}) != h
