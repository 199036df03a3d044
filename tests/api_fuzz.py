"""Strategies of the API fuzz (issue 18 §4), shared by the in-process fuzz
(tests/unit/api/test_api_fuzz.py) and the one against a live ``murphy server``
(tests/e2e/test_api_fuzz_live.py): every operation's members, the REST mirror's and events API's
routes, and how a request is (not) signed."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from murphy.api.wire import TARGETS

MEMBERS = ["TrainingJobName", "MaxResults", "NextToken", "NameContains", "StatusEquals", "SortBy", "SortOrder",
           "CreationTimeAfter", "ResourceArn", "Tags", "TagKeys", "AlgorithmSpecification", "RoleArn",
           "OutputDataConfig", "ResourceConfig", "StoppingCondition", "DebugRuleConfigurations", "HyperParameters",
           "logGroupName", "logGroupIdentifier", "logStreamName", "logStreamNamePrefix", "orderBy", "descending",
           "limit", "nextToken", "startFromHead", "startTime", "endTime"]
SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
           | st.text(max_size=40) | st.sampled_from(["job-1", "arn:aws:sagemaker:eu-west-1:123456789012:training-job/job-1",
                                                    "/aws/sagemaker/TrainingJobs", "Ascending", "f/00000000000000000001"]))
JSON = st.recursive(SCALARS, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
                    max_leaves=25)


def bodies(sample: dict[str, Any]) -> SearchStrategy[Any]:
    """Request bodies: members of every operation, a valid CreateTrainingJob (``sample``) with
    some members replaced, and any JSON at all."""
    return st.one_of(
        st.dictionaries(st.sampled_from(MEMBERS) | st.text(max_size=12), JSON, max_size=6),
        st.builds(lambda extra: {**sample, **extra}, st.dictionaries(st.sampled_from(MEMBERS), JSON, max_size=3)),
        JSON,
    )


WIRE_TARGETS = st.sampled_from(sorted(TARGETS)) | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40)
SEGMENT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=20)
REST = st.one_of(
    st.tuples(st.just("GET"), st.just("/v1/training-jobs")),
    st.tuples(st.sampled_from(["GET", "POST", "DELETE"]), st.builds(lambda s: f"/v1/training-jobs/{s}", SEGMENT)),
    st.tuples(st.just("POST"), st.builds(lambda s: f"/v1/training-jobs/{s}/stop", SEGMENT)),
    st.tuples(st.sampled_from(["GET", "POST"]), st.just("/v1/subscriptions")),
    st.tuples(st.sampled_from(["GET", "DELETE"]), st.builds(lambda s: f"/v1/subscriptions/{s}", SEGMENT)),
    st.tuples(st.just("GET"), st.builds(lambda s: f"/v1/subscriptions/{s}/dead-letters", SEGMENT)),
    st.tuples(st.just("POST"), st.builds(lambda s: f"/v1/subscriptions/{s}/redrive", SEGMENT)),
    st.tuples(st.just("GET"), st.sampled_from(["/v1/dead-letters", "/v1/events", "/nope", "/v1"])),
)
QUERY = st.dictionaries(st.sampled_from(["max_results", "status", "next_token", "sort_by", "after", "limit", "pattern",
                                         "name_contains", "subscription"]), st.text(max_size=30), max_size=3)
AUTH = st.sampled_from(["sign", "sign", "sign", "none", "garbage", "wrong-service"])
GARBAGE_AUTH = {"Authorization": "AWS4-HMAC-SHA256 Credential=/x, Signature=zz", "X-Amz-Date": "2026"}


def check(status: int, body: bytes) -> None:
    """Never a 5xx; every error a JSON object with a non-empty ``__type`` and ``message``."""
    assert status < 500, (status, body[:500])
    if status >= 400:
        doc = json.loads(body)
        assert isinstance(doc.get("__type"), str) and doc["__type"], doc
        assert isinstance(doc.get("message"), str) and doc["message"], doc
