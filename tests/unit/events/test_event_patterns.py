"""EventBridge event patterns: the examples of EventBridge's "Content filtering in event
patterns" and "Event patterns" documentation, SageMaker's own pattern, and invalid patterns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from murphy.events.patterns import matches, validate_pattern
from murphy.exceptions import ValidationException

# The documentation's running example (an EC2 state change).
EC2 = {
    "version": "0",
    "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
    "detail-type": "EC2 Instance State-change Notification",
    "source": "aws.ec2",
    "account": "111122223333",
    "time": "2017-12-22T18:43:48Z",
    "region": "us-west-1",
    "resources": ["arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0"],
    "detail": {
        "instance-id": "i-1234567890abcdef0",
        "state": "terminated",
        "c-count": 5,
        "d-count": 3,
        "x-limit": 301.8,
        "source-ip": "10.0.0.123",
        "location": None,
        "empty": "",
        "flag": True,
    },
}

SAGEMAKER = {
    "version": "0", "id": "e1", "detail-type": "SageMaker Training Job State Change",
    "source": "aws.sagemaker", "account": "123456789012", "time": "2024-01-01T00:00:00Z",
    "region": "us-east-1", "resources": ["arn:aws:sagemaker:us-east-1:123456789012:training-job/j"],
    "detail": {
        "TrainingJobName": "j", "TrainingJobStatus": "Stopping", "SecondaryStatus": "Stopping",
        "DebugRuleEvaluationStatuses": [
            {"RuleConfigurationName": "LossNotDecreasing", "RuleEvaluationStatus": "Stopping"},
            {"RuleConfigurationName": "ExplodingTensor", "RuleEvaluationStatus": "IssuesFound"},
        ],
        "MurphyChanges": [
            {"Kind": "TrainingJobStatus", "From": "InProgress", "To": "Stopping"},
            {"Kind": "RuleEvaluationStatus", "From": "InProgress", "To": "IssuesFound",
             "RuleConfigurationName": "ExplodingTensor", "Step": 4, "Tensor": "loss"},
        ],
    },
}


def check(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    return matches(validate_pattern(pattern), event)


@pytest.mark.parametrize(("pattern", "expected"), [
    ({}, True),
    ({"source": ["aws.ec2"]}, True),
    ({"source": ["aws.ec2", "aws.fargate"]}, True),
    ({"source": ["aws.s3"]}, False),
    ({"source": ["aws.ec2"], "detail": {"state": ["running"]}}, False),  # fields AND
    ({"detail": {"state": ["running", "terminated"]}}, True),  # values OR
    # prefix / suffix / equals-ignore-case
    ({"time": [{"prefix": "2017-12-22"}]}, True),
    ({"time": [{"prefix": "2018"}]}, False),
    ({"detail": {"instance-id": [{"prefix": {"equals-ignore-case": "I-12"}}]}}, True),
    ({"detail": {"instance-id": [{"suffix": "cdef0"}]}}, True),
    ({"detail": {"instance-id": [{"suffix": {"equals-ignore-case": "CDEF0"}}]}}, True),
    ({"detail": {"instance-id": [{"suffix": ".png"}]}}, False),
    ({"detail-type": [{"equals-ignore-case": "ec2 instance state-change notification"}]}, True),
    # anything-but
    ({"detail": {"state": [{"anything-but": "initializing"}]}}, True),
    ({"detail": {"state": [{"anything-but": ["stopped", "terminated"]}]}}, False),
    ({"detail": {"c-count": [{"anything-but": [5]}]}}, False),
    ({"detail": {"c-count": [{"anything-but": 6}]}}, True),
    ({"detail": {"state": [{"anything-but": {"prefix": "init"}}]}}, True),
    ({"detail": {"state": [{"anything-but": {"prefix": "term"}}]}}, False),
    ({"detail": {"state": [{"anything-but": {"suffix": "ated"}}]}}, False),
    ({"detail": {"state": [{"anything-but": {"equals-ignore-case": ["TERMINATED"]}}]}}, False),
    ({"detail": {"state": [{"anything-but": {"wildcard": "*run*"}}]}}, True),
    ({"detail": {"missing": [{"anything-but": "x"}]}}, False),  # absent fields match nothing
    # numeric
    ({"detail": {"c-count": [{"numeric": [">", 0, "<=", 5]}]}}, True),
    ({"detail": {"d-count": [{"numeric": ["<", 10]}]}}, True),
    ({"detail": {"x-limit": [{"numeric": ["=", 3.018e2]}]}}, True),
    ({"detail": {"x-limit": [{"numeric": [">=", 302]}]}}, False),
    ({"detail": {"state": [{"numeric": [">", 0]}]}}, False),  # a string is not a number
    ({"detail": {"c-count": [5.0]}}, True),  # 5 and 5.0 are the same number
    ({"detail": {"c-count": ["5"]}}, False),  # ... but not the same as a string
    # exists
    ({"detail": {"state": [{"exists": True}]}}, True),
    ({"detail": {"state": [{"exists": False}]}}, False),
    ({"detail": {"nope": [{"exists": False}]}}, True),
    ({"nope": {"deeper": [{"exists": False}]}}, True),
    ({"nope": {"deeper": [{"exists": True}]}}, False),
    # null, empty string, booleans
    ({"detail": {"location": [None]}}, True),
    ({"detail": {"nope": [None]}}, False),  # null is not "absent"
    ({"detail": {"empty": [""]}}, True),
    ({"detail": {"flag": [True]}}, True),
    ({"detail": {"flag": [1]}}, False),  # true is not 1
    # cidr, wildcard
    ({"detail": {"source-ip": [{"cidr": "10.0.0.0/24"}]}}, True),
    ({"detail": {"source-ip": [{"cidr": "10.0.1.0/24"}]}}, False),
    ({"detail": {"instance-id": [{"wildcard": "i-*def0"}]}}, True),
    ({"detail": {"instance-id": [{"wildcard": "i-*abc"}]}}, False),
    # arrays in the event: any element
    ({"resources": ["arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0"]}, True),
    ({"resources": [{"prefix": "arn:aws:ec2:"}]}, True),
    ({"resources": ["arn:aws:ec2:us-west-1:123456789012:instance/other"]}, False),
    # $or
    ({"$or": [{"detail": {"c-count": [{"numeric": [">", 9]}]}},
              {"detail": {"d-count": [{"numeric": ["<", 5]}]}}]}, True),
    ({"source": ["aws.ec2"], "$or": [{"detail": {"state": ["running"]}},
                                     {"region": ["eu-west-1"]}]}, False),
])
def test_documented_examples(pattern: dict[str, Any], expected: bool) -> None:
    assert check(pattern, EC2) is expected


def test_the_sagemaker_patterns() -> None:
    assert check({"source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"],
                  "detail": {"TrainingJobStatus": ["Failed", "Stopping"]}}, SAGEMAKER)
    finding = {"detail": {"DebugRuleEvaluationStatuses": {"RuleEvaluationStatus": ["IssuesFound"]}}}
    assert check(finding, SAGEMAKER)
    healthy = json.loads(json.dumps(SAGEMAKER))
    healthy["detail"]["DebugRuleEvaluationStatuses"][1]["RuleEvaluationStatus"] = "InProgress"
    assert not check(finding, healthy)
    # The exact change: a finding of ExplodingTensor, found in this write.
    change = {"detail": {"MurphyChanges": {"Kind": ["RuleEvaluationStatus"], "To": ["IssuesFound"],
                                           "RuleConfigurationName": ["ExplodingTensor"]}}}
    assert check(change, SAGEMAKER)
    assert not check(change, healthy | {"detail": {**healthy["detail"], "MurphyChanges": []}})


def test_a_pattern_over_an_array_of_objects_holds_within_one_element() -> None:
    # LossNotDecreasing is Stopping and ExplodingTensor is IssuesFound: no one rule is both.
    mixed = {"detail": {"DebugRuleEvaluationStatuses": {
        "RuleConfigurationName": ["LossNotDecreasing"], "RuleEvaluationStatus": ["IssuesFound"]}}}
    assert not check(mixed, SAGEMAKER)
    same = {"detail": {"DebugRuleEvaluationStatuses": {
        "RuleConfigurationName": ["ExplodingTensor"], "RuleEvaluationStatus": ["IssuesFound"]}}}
    assert check(same, SAGEMAKER)


def test_a_pattern_may_be_given_as_json_text() -> None:
    assert validate_pattern('{"source": ["aws.sagemaker"]}') == {"source": ["aws.sagemaker"]}


@pytest.mark.parametrize(("pattern", "message"), [
    ("{not json", "not valid JSON"),
    ([], "must be a JSON object, not an array"),
    ({"source": "aws.sagemaker"}, 'field "source": must be an array of values to match or an object, not a string (write ["aws.sagemaker"]'),
    ({"detail": {"TrainingJobStatus": []}}, '"detail.TrainingJobStatus": an empty array matches nothing'),
    ({"detail": {}}, '"detail": an empty object matches nothing'),
    ({"source": [["a"]]}, "an array cannot be matched"),
    ({"source": [{"prefix": "a", "suffix": "b"}]}, "exactly one key"),
    ({"source": [{"startswith": "a"}]}, 'unknown filter "startswith"'),
    ({"source": [{"prefix": 5}]}, "prefix must be a string"),
    ({"source": [{"exists": "yes"}]}, "exists must be true or false"),
    ({"n": [{"numeric": [">", "5"]}]}, "not a finite number"),
    ({"n": [{"numeric": ["~", 5]}]}, "unknown operator"),
    ({"n": [{"numeric": ["<", 5, ">", 1]}]}, "lower bound"),
    ({"n": [{"numeric": [">", 5, "<", 1]}]}, "range is empty"),
    ({"n": [{"numeric": [">"]}]}, "one or two (operator, number) pairs"),
    ({"n": [{"anything-but": {"numeric": [">", 1]}}]}, "takes values or one of"),
    ({"n": [{"anything-but": [None]}]}, "takes strings or numbers, not null"),
    ({"n": [{"anything-but": []}]}, "needs at least one value"),
    ({"ip": [{"cidr": "10.0.0.0/99"}]}, "not an IP address range"),
    ({"w": [{"wildcard": "a**b"}]}, "consecutive wildcards"),
    ({"$or": [{"a": ["x"]}]}, "at least two non-empty objects"),
    ({"$or": [{"a": ["x"]}, {"b": "y"}]}, '"$or[1].b": must be an array'),
    ({"a": ["x" * 5000]}, "the limit is 4096"),
    ({"n": [float("nan")]}, "not JSON"),
])
def test_invalid_patterns_say_what_is_wrong(pattern: Any, message: str) -> None:
    with pytest.raises(ValidationException) as caught:
        validate_pattern(pattern)
    assert message in caught.value.message


def test_deep_nesting_is_refused() -> None:
    pattern: dict[str, Any] = {"leaf": ["x"]}
    for _ in range(40):
        pattern = {"a": pattern}
    with pytest.raises(ValidationException, match="nested more than"):
        validate_pattern(pattern)
