"""Every wire model matches botocore's bundled service model: each field is a member of the
shape with the same name, a compatible type and the same constraints (lengths, ranges, patterns,
enum values); each required member of the shape exists."""

from __future__ import annotations

import inspect
import types
from typing import Annotated, Any, Union, get_args, get_origin

import annotated_types
import pytest
from pydantic import AfterValidator, BeforeValidator, Field

from murphy.api.shapes import common, logs, requests, responses, training
from murphy.api.shapes.common import AwsModel, EnumRule, StrRule, botocore_shapes, s

MODULES = (common, training, requests, responses, logs)
#: CreateTrainingJobRequest members murphy rejects ("not supported by murphy").
UNSUPPORTED = {"ServerlessJobConfig", "MlflowConfig", "ModelPackageConfig"}


def all_models() -> list[type[AwsModel]]:
    found: dict[str, type[AwsModel]] = {}
    for module in MODULES:
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, AwsModel) and obj.aws_shape:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def _split(tp: Any) -> tuple[Any, list[Any]]:
    """(bare type, metadata) with Optional and Annotated removed."""
    meta: list[Any] = []
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            args = get_args(tp)
            tp, meta = args[0], [*meta, *args[1:]]
        elif origin is Union or origin is types.UnionType:
            rest = [a for a in get_args(tp) if a is not type(None)]
            assert len(rest) == 1, f"unions are not AWS types: {tp}"
            tp = rest[0]
        else:
            return tp, meta


def _flatten(meta: list[Any]) -> list[Any]:
    out: list[Any] = []
    for m in meta:
        out.extend(getattr(m, "metadata", None) or [m])  # FieldInfo carries its constraints
    return out


def type_problems(tp: Any, meta: list[Any], service: str, shape_name: str, where: str) -> list[str]:
    shapes = botocore_shapes(service)
    shape = shapes[shape_name]
    kind = shape["type"]
    inner, more = _split(tp)
    meta = _flatten([*meta, *more])
    problems: list[str] = []

    def bound(cls: type, attr: str, key: str) -> None:
        for m in meta:
            if isinstance(m, cls) and getattr(m, attr) != shape.get(key):
                problems.append(f"{where}: {attr}={getattr(m, attr)} but botocore {shape_name}.{key}={shape.get(key)}")

    if isinstance(inner, type) and issubclass(inner, AwsModel):
        if kind != "structure":
            return [f"{where}: a structure here, botocore {shape_name} is {kind}"]
        if inner.aws_shape != shape_name:
            return [f"{where}: model {inner.__name__} mirrors {inner.aws_shape}, botocore uses {shape_name}"]
        return problems
    origin = get_origin(inner)
    if origin is list:
        if kind != "list":
            return [f"{where}: a list here, botocore {shape_name} is {kind}"]
        bound(annotated_types.MaxLen, "max_length", "max")
        if shape.get("min"):
            bound(annotated_types.MinLen, "min_length", "min")
        (item,) = get_args(inner)
        return problems + type_problems(item, [], service, shape["member"]["shape"], f"{where}[]")
    if origin is dict:
        if kind != "map":
            return [f"{where}: a map here, botocore {shape_name} is {kind}"]
        bound(annotated_types.MaxLen, "max_length", "max")
        key, value = get_args(inner)
        return (problems + type_problems(key, [], service, shape["key"]["shape"], f"{where}{{key}}")
                + type_problems(value, [], service, shape["value"]["shape"], f"{where}{{value}}"))
    expected = {str: ("string",), bool: ("boolean",), int: ("integer", "long"), float: ("float", "double")}.get(inner)
    is_timestamp = any(isinstance(m, BeforeValidator) for m in meta)
    if is_timestamp:
        expected = ("timestamp",)
    if expected is None or kind not in expected:
        return [f"{where}: {getattr(inner, '__name__', inner)} here, botocore {shape_name} is {kind}"]
    for m in meta:
        rule = m.func if isinstance(m, AfterValidator) else None
        if isinstance(rule, EnumRule):
            if set(rule.values) != set(shape.get("enum", ())):
                problems.append(f"{where}: enum {sorted(rule.values)} != botocore {shape_name} {shape.get('enum')}")
        elif isinstance(rule, StrRule):
            if rule.max_len != shape.get("max") or rule.min_len != shape.get("min", 0):
                problems.append(f"{where}: length {rule.min_len}..{rule.max_len} != botocore "
                                f"{shape.get('min', 0)}..{shape.get('max')}")
            model_pattern = shape.get("pattern")
            ours = rule.pattern
            if ours is not None and ours != model_pattern:
                problems.append(f"{where}: pattern {ours!r} != botocore {model_pattern!r}")
            if ours is None and rule.chars is None and model_pattern not in (None, ".*"):
                problems.append(f"{where}: botocore {shape_name} has pattern {model_pattern!r}, not checked here")
    if kind in ("integer", "long"):
        for m in meta:
            if isinstance(m, annotated_types.Ge) and m.ge < shape.get("min", m.ge):
                problems.append(f"{where}: ge={m.ge} is looser than botocore min={shape.get('min')}")
            if isinstance(m, annotated_types.Le) and m.le != shape.get("max"):
                problems.append(f"{where}: le={m.le} != botocore max={shape.get('max')}")
    if "enum" in shape and not any(isinstance(getattr(m, "func", None), EnumRule) for m in meta):
        problems.append(f"{where}: botocore {shape_name} is an enum, not checked here")
    return problems


def model_problems(model: type[AwsModel]) -> list[str]:
    shapes = botocore_shapes(model.aws_service)
    shape = shapes.get(model.aws_shape)
    if shape is None or shape["type"] != "structure":
        return [f"{model.__name__}: no structure {model.aws_shape} in botocore's {model.aws_service} model"]
    members = shape["members"]
    problems = []
    for name, field in model.model_fields.items():
        if name not in members:
            problems.append(f"{model.__name__}.{name}: not a member of {model.aws_shape}")
            continue
        problems += type_problems(field.annotation, list(field.metadata), model.aws_service,
                                  members[name]["shape"], f"{model.__name__}.{name}")
    missing = [m for m in shape.get("required", []) if m not in model.model_fields and m not in UNSUPPORTED]
    problems += [f"{model.__name__}: required member {m} of {model.aws_shape} is missing" for m in missing]
    return problems


def test_the_walk_finds_the_models() -> None:
    names = {m.__name__ for m in all_models()}
    assert {"CreateTrainingJobRequest", "DescribeTrainingJobResponse", "ListTrainingJobsResponse", "Channel",
            "S3DataSource", "DebugRuleEvaluationStatus", "GetLogEventsResponse", "LogStream"} <= names
    assert len(names) >= 45


@pytest.mark.parametrize("model", all_models(), ids=lambda m: f"{m.__module__.rsplit('.', 1)[1]}.{m.__name__}")
def test_model_matches_botocore(model: type[AwsModel]) -> None:
    assert model_problems(model) == []


def test_create_training_job_covers_every_member_or_says_it_is_unsupported() -> None:
    members = set(botocore_shapes("sagemaker")["CreateTrainingJobRequest"]["members"])
    assert members - set(requests.CreateTrainingJobRequest.model_fields) == UNSUPPORTED


# --- the check can fail -------------------------------------------------------------------------


class _Misspelled(AwsModel):
    aws_shape = "DescribeTrainingJobRequest"
    TrainingJobNmae: common.TrainingJobName


class _WrongType(AwsModel):
    aws_shape = "StoppingCondition"
    MaxRuntimeInSeconds: str | None = None


class _WrongLimits(AwsModel):
    aws_shape = "DebugRuleConfiguration"
    RuleConfigurationName: Annotated[str, s(1, 255)]
    RuleEvaluatorImage: common.ImageUri
    RuleParameters: Annotated[dict[common.ConfigKey, common.ConfigValue], Field(max_length=101)] | None = None
    InstanceType: common.TrainingInstanceType | None = None


class _WrongStructure(AwsModel):
    aws_shape = "Channel"
    ChannelName: Annotated[str, s(1, 64, r"[A-Za-z0-9\.\-_]+")]
    DataSource: training.S3DataSource


def test_the_check_detects_mistakes() -> None:
    assert model_problems(_Misspelled) == [
        "_Misspelled.TrainingJobNmae: not a member of DescribeTrainingJobRequest",
        "_Misspelled: required member TrainingJobName of DescribeTrainingJobRequest is missing",
    ]
    assert model_problems(_WrongType) == [
        "_WrongType.MaxRuntimeInSeconds: str here, botocore MaxRuntimeInSeconds is integer"]
    wrong = model_problems(_WrongLimits)
    assert "_WrongLimits.RuleConfigurationName: length 1..255 != botocore 1..256" in wrong
    assert "_WrongLimits.RuleParameters: max_length=101 but botocore RuleParameters.max=100" in wrong
    assert any(p.startswith("_WrongLimits.InstanceType: enum") for p in wrong)  # training vs processing types
    assert model_problems(_WrongStructure) == [
        "_WrongStructure.DataSource: model S3DataSource mirrors S3DataSource, botocore uses DataSource"]
