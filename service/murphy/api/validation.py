"""Request validation with SageMaker's messages.

pydantic checks each member (see :mod:`murphy.api.shapes.common`); this module turns its errors
into AWS's wording, e.g. ``1 validation error detected: Value 'bad_name' at 'trainingJobName'
failed to satisfy constraint: Member must satisfy regular expression pattern:
^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``. Paths are AWS's: member names with a lower-case first letter,
joined by dots, list items as ``<1-based index>.member``. Rules that span members (unique rule
names, what murphy requires beyond the model) run once the members are valid.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from murphy.api.shapes.common import CONSTRAINT_ERROR, AwsModel, botocore_shapes
from murphy.api.shapes.requests import CreateTrainingJobRequest
from murphy.exceptions import ServiceError, ValidationException

M = TypeVar("M", bound=AwsModel)

_MAX_VALUE_CHARS = 512
_TYPE_NAMES = {
    "string_type": "a string", "int_type": "an integer", "int_parsing": "an integer",
    "int_from_float": "an integer", "bool_type": "a boolean", "float_type": "a number",
    "list_type": "a list", "dict_type": "a map", "model_type": "a structure",
    "model_attributes_type": "a structure", "aws_type": "a timestamp",
}


def parse(model: type[M], data: Any, *, error: type[ServiceError] = ValidationException) -> M:
    """Validate ``data`` (a decoded JSON object) as ``model``; raise ``error`` with AWS's message."""
    try:
        obj = model.model_validate(data)
    except PydanticValidationError as e:
        raise error(summarize(messages(model, data, e.errors(include_url=False)))) from None
    check = _CROSS_FIELD.get(model)
    if check is not None:
        problems = check(obj)
        if problems:
            raise error(summarize(problems))
    return obj


def summarize(problems: Sequence[str]) -> str:
    n = len(problems)
    return f"{n} validation error{'s' if n != 1 else ''} detected: " + "; ".join(problems)


def camel(member: str) -> str:
    return member[:1].lower() + member[1:]


def render(value: Any, depth: int = 0) -> str:
    """A value as AWS prints it in messages (Java's toString style), cut when very long or deep."""
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, list | tuple | dict) and depth >= 8:
        text = "..."
    elif isinstance(value, list | tuple):
        text = "[" + ", ".join(render(v, depth + 1) for v in value[:100]) + "]"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{k}={render(v, depth + 1)}" for k, v in list(value.items())[:100]) + "}"
    else:
        text = str(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[:_MAX_VALUE_CHARS] + "..."


def _at(value: Any, path: str, constraint: str) -> str:
    shown = "null" if value is None else f"'{render(value)}'"
    return f"Value {shown} at '{path}' failed to satisfy constraint: {constraint}"


def _unwrap(tp: Any) -> Any:
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin is Union or origin is types.UnionType:
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


class _Place:
    """Where an error's ``loc`` points: AWS path, owning model, map context, the raw value."""

    def __init__(self, model: type[BaseModel], data: Any, loc: tuple[int | str, ...]) -> None:
        parts: list[str] = []
        tp: Any = model
        raw: Any = data
        self.owner: type[BaseModel] = model  # the structure the last member belongs to
        self.map_part: str | None = None  # "key" | "value" when the error is inside a map
        self.map_value: Any = None
        for i, el in enumerate(loc):
            base = _unwrap(tp)
            origin = get_origin(base)
            if isinstance(base, type) and issubclass(base, BaseModel) and isinstance(el, str):
                self.owner = base
                parts.append(camel(el))
                field = base.model_fields.get(el)
                tp = field.annotation if field is not None else Any
            elif origin is list and isinstance(el, int):
                parts.append(f"{el + 1}.member")
                tp = get_args(base)[0]
            elif origin is dict:
                self.map_value = raw
                self.map_part = "key" if loc[i + 1:i + 2] == ("[key]",) else "value"
                break
            else:
                parts.append(camel(str(el)))
                break
            raw = raw.get(el) if isinstance(raw, dict) and isinstance(el, str) else (
                raw[el] if isinstance(raw, list) and isinstance(el, int) and el < len(raw) else None
            )
        end = _unwrap(tp)
        if self.map_part is None and isinstance(end, type) and issubclass(end, BaseModel):
            self.owner = end
        self.path = ".".join(parts)
        self.value = raw


def _extra_member(model: type[BaseModel], data: Any, loc: tuple[int | str, ...], value: Any) -> str:
    place = _Place(model, data, loc[:-1])
    name = str(loc[-1])
    path = ".".join(p for p in (place.path, camel(name)) if p)
    owner = place.owner
    aws_service = getattr(owner, "aws_service", "sagemaker")
    aws_shape = getattr(owner, "aws_shape", "") or owner.__name__
    try:
        modeled = name in botocore_shapes(aws_service)[aws_shape]["members"]
    except KeyError:
        modeled = False
    if modeled:
        return _at(value, path, f"Member {name} of {aws_shape} is not supported by murphy")
    return _at(value, path, f"{aws_shape} has no member named {name} (botocore sends only modeled members: check the name)")


def messages(model: type[BaseModel], data: Any, errors: Sequence[Any]) -> list[str]:
    """One AWS message per violated constraint."""
    out: list[str] = []
    for err in errors:
        loc = tuple(err["loc"])
        kind = err["type"]
        ctx = err.get("ctx") or {}
        if kind == "extra_forbidden":
            out.append(_extra_member(model, data, loc, err["input"]))
            continue
        place = _Place(model, data, loc)
        if kind == CONSTRAINT_ERROR:
            problems: tuple[str, ...] = ctx["problems"]
            if place.map_part is not None:
                which = "Map keys" if place.map_part == "key" else "Map value"
                out.append(_at(place.map_value, place.path,
                               f"{which} must satisfy constraint: [{', '.join(problems)}]"))
            else:
                out.extend(_at(err["input"], place.path, p) for p in problems)
            continue
        value = place.value if kind != "missing" else None
        if kind == "missing" or (err["input"] is None and kind in _TYPE_NAMES):
            out.append(_at(None, place.path, "Member must not be null"))
        elif kind == "too_long":
            out.append(_at(value, place.path, f"Member must have length less than or equal to {ctx['max_length']}"))
        elif kind == "too_short":
            out.append(_at(value, place.path, f"Member must have length greater than or equal to {ctx['min_length']}"))
        elif kind == "greater_than_equal":
            out.append(_at(value, place.path, f"Member must have value greater than or equal to {ctx['ge']}"))
        elif kind == "less_than_equal":
            out.append(_at(value, place.path, f"Member must have value less than or equal to {ctx['le']}"))
        elif kind in _TYPE_NAMES:
            out.append(_at(err["input"], place.path, f"Member must be {_TYPE_NAMES[kind]}"))
        else:
            out.append(_at(err["input"], place.path, str(err["msg"])))
    return out


# --- rules across members ------------------------------------------------------------------


def _create_training_job(req: CreateTrainingJobRequest) -> list[str]:
    out: list[str] = []
    algo = req.AlgorithmSpecification
    if algo.AlgorithmName is not None:
        out.append(_at(algo.AlgorithmName, "algorithmSpecification.algorithmName",
                       "murphy has no built-in algorithms: give AlgorithmSpecification.TrainingImage instead"))
    elif algo.TrainingImage is None:
        out.append(_at(None, "algorithmSpecification.trainingImage", "Member must not be null"))
    res = req.ResourceConfig
    if not res.InstanceGroups:
        if res.InstanceType is None:
            out.append(_at(None, "resourceConfig.instanceType", "Member must not be null"))
        if res.InstanceCount is None:
            out.append(_at(None, "resourceConfig.instanceCount", "Member must not be null"))
        elif res.InstanceCount < 1:
            out.append(_at(res.InstanceCount, "resourceConfig.instanceCount",
                           "Member must have value greater than or equal to 1"))
    out.extend(_sharded_channels(req))
    seen: set[str] = set()
    for member, rules in (("debugRuleConfigurations", req.DebugRuleConfigurations),
                          ("profilerRuleConfigurations", req.ProfilerRuleConfigurations)):
        for i, rule in enumerate(rules or ()):
            name = rule.RuleConfigurationName
            if name in seen:
                out.append(_at(name, f"{member}.{i + 1}.member.ruleConfigurationName",
                               "RuleConfigurationName must be unique across DebugRuleConfigurations "
                               "and ProfilerRuleConfigurations"))
            seen.add(name)
    return out


#: What murphy shards a ``ShardedByS3Key`` channel by: the objects under a prefix, a manifest's entries.
_SHARDABLE_TYPES = ("S3Prefix", "ManifestFile")


def _sharded_channels(req: CreateTrainingJobRequest) -> list[str]:
    """``ShardedByS3Key`` where murphy cannot honour it: data types other than S3Prefix /
    ManifestFile (an augmented manifest is sharded by record on SageMaker, and murphy does not
    read augmented manifests at all). Every input mode shards alike: a Pipe channel streams this
    host's share."""
    out: list[str] = []
    for i, ch in enumerate(req.InputDataConfig or ()):
        s3 = ch.DataSource.S3DataSource
        if s3 is None or s3.S3DataDistributionType != "ShardedByS3Key":
            continue
        path = f"inputDataConfig.{i + 1}.member.dataSource.s3DataSource.s3DataDistributionType"
        if s3.S3DataType not in _SHARDABLE_TYPES:
            out.append(_at(s3.S3DataDistributionType, path,
                           f"ShardedByS3Key is supported by murphy for S3DataType S3Prefix and ManifestFile only "
                           f"(channel {ch.ChannelName} is {s3.S3DataType})"))
    return out


_CROSS_FIELD: dict[type[AwsModel], Callable[[Any], list[str]]] = {
    CreateTrainingJobRequest: _create_training_job,
}
