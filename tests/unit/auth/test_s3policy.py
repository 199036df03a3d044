"""murphy.auth.s3policy: which S3 requests a container's grants allow (pure)."""

from __future__ import annotations

import pytest

from murphy.auth.s3policy import Grants, Request, decide, grants_for
from murphy.runtimes.base import Channel, RulePlan, TrainingPlan


def _plan(**kw: object) -> TrainingPlan:
    base: dict[str, object] = {
        "container_name": "j-training", "job_name": "j", "image": "i", "hyperparameters": {
            "sagemaker_submit_directory": '"s3://b/src/j/sourcedir.tar.gz"'}, "environment": {},
        "instance_type": "ml.m5.large", "instance_count": 1, "channels": (Channel("train", "s3://b/data/train"),),
        "tensor_uri": "s3://b/debug/j/debug-output", "output_uri": "s3://b/out/j/output",
        "tensorboard_uri": "s3://b/tb/j/tensorboard-output", "checkpoint_uri": "s3://b/ckpt/j"}
    base.update(kw)
    return TrainingPlan(**base)  # type: ignore[arg-type]


def test_training_grants() -> None:
    g = grants_for(_plan())
    assert g.read == ("b/src/j/sourcedir.tar.gz", "b/data/train")
    assert g.write == ("b/out/j/output/", "b/debug/j/debug-output/", "b/tb/j/tensorboard-output/", "b/ckpt/j/")
    assert Grants.from_actions(g.actions()) == g
    assert all(a.startswith("s3:") for a in g.actions())  # no murphy API action matches them


def test_manifest_channels_grant_the_prefix_they_name() -> None:
    plan = _plan(channels=(Channel("train", "s3://b/m/manifest.json", data_type="ManifestFile"),))
    g = grants_for(plan, lambda uri: ["s3://b/images/"])
    assert "b/m/manifest.json" in g.read and "b/images/" in g.read


def test_rule_grants() -> None:
    plan = RulePlan(container_name="j-rule-0", job_name="j", rule_name="R", image="r",
                    rule_parameters={"source_s3_uri": "s3://b/rules/my_rule.py"},
                    base_trial_uri="s3://b/debug/j/debug-output", result_uri="s3://b/debug/j/rule-output/R")
    g = grants_for(plan)
    assert g.read == ("b/debug/j/debug-output/", "b/rules/my_rule.py")
    assert g.write == ("b/debug/j/rule-output/R/",)


G = Grants(read=("b/data/train",), write=("b/out/j/output/",))


@pytest.mark.parametrize(("method", "path", "query", "allowed"), [
    ("GET", "/b/data/train/x.csv", "", True),
    ("GET", "/b/data/train2/x.csv", "", True),  # S3Prefix semantics: a string prefix, as SageMaker
    ("HEAD", "/b/out/j/output/model.tar.gz", "", True),  # writers read back their own
    ("GET", "/b/out/j2/output/model.tar.gz", "", False),
    ("GET", "/b/data/other", "", False),
    ("PUT", "/b/out/j/output/model.tar.gz", "", True),
    ("PUT", "/b/data/train/x.csv", "", False),  # inputs are read-only
    ("PUT", "/b/out/j/output/a%20b%2Bc=d", "", True),
    ("PUT", "/b/out/j/output/../../k/x", "", False),  # a filer could resolve it elsewhere
    ("PUT", "/b/out/j/output/%2E%2E/%2e%2e/k", "", False),
    ("GET", "/b", "list-type=2&prefix=out/j/output/../", False),
    ("DELETE", "/b/out/j/output/x", "", True),
    ("DELETE", "/b/data/train/x", "", False),
    ("POST", "/b/out/j/output/big", "uploads", True),
    ("PUT", "/b/out/j/output/big", "partNumber=1&uploadId=u", True),
    ("GET", "/b/data/train/big", "uploadId=u", False),  # ListParts needs write
    ("POST", "/b/data/train/x", "restore", False),
    ("GET", "/b", "list-type=2&prefix=data/train/", True),
    ("GET", "/b", "list-type=2&prefix=out/j/output", True),  # the folder without its slash
    ("GET", "/b", "list-type=2&prefix=out/", False),
    ("GET", "/b", "list-type=2", False),
    ("GET", "/b", "", False),  # ListObjects v1 of the bucket
    ("HEAD", "/b", "", True),
    ("GET", "/b", "location", True),
    ("HEAD", "/other", "", False),
    ("GET", "/b", "policy", False),
    ("PUT", "/b", "", False),  # CreateBucket
    ("PUT", "/b", "acl", False),
    ("GET", "/", "", False),  # ListBuckets
    ("DELETE", "/b", "", False),
])
def test_decide(method: str, path: str, query: str, allowed: bool) -> None:
    assert (decide(Request(method, path, query), G) is None) is allowed


def test_copy_needs_a_readable_source() -> None:
    ok = Request("PUT", "/b/out/j/output/copy", "", copy_source="/b/data/train/x.csv")
    bad = Request("PUT", "/b/out/j/output/copy", "", copy_source="b/out/j2/output/secret%3F?versionId=1")
    assert decide(ok, G) is None
    assert decide(bad, G) is not None


def test_multi_object_delete_checks_every_key() -> None:
    def body(*keys: str) -> bytes:
        objs = "".join(f"<Object><Key>{k}</Key></Object>" for k in keys)
        return f'<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{objs}</Delete>'.encode()

    assert decide(Request("POST", "/b", "delete", body=body("out/j/output/a", "out/j/output/b")), G) is None
    assert decide(Request("POST", "/b", "delete", body=body("out/j/output/a", "data/train/x")), G) is not None
    assert decide(Request("POST", "/b", "delete", body=b"<not xml"), G) is not None
