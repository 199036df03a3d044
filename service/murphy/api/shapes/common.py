"""Building blocks of the wire shapes: the base model, constraint validators, enums, timestamps.

Constraints are checked by our own validators (not pydantic's ``pattern``/``max_length`` on
strings) so that one value can fail several constraints at once and each failure becomes its own
AWS-style message (see :mod:`murphy.api.validation`), and so that patterns are matched with
Python's ``re`` as whole-value matches, the way AWS applies its (unanchored) model patterns.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from functools import lru_cache
from typing import Annotated, Any, ClassVar

import botocore.loaders
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

#: pydantic error type whose ``ctx["problems"]`` holds one AWS constraint message per failure.
CONSTRAINT_ERROR = "aws_constraint"


class AwsModel(BaseModel):
    """A structure of the AWS model; field names are the AWS member names verbatim."""

    model_config = ConfigDict(extra="forbid", strict=True)

    #: (botocore service, shape name) this model mirrors; checked by tests/unit/api/test_botocore_model.py.
    aws_service: ClassVar[str] = "sagemaker"
    aws_shape: ClassVar[str] = ""


@lru_cache(maxsize=4)
def botocore_shapes(service: str) -> dict[str, Any]:
    """The shapes of botocore's bundled model for ``service`` (loaded once, on first use)."""
    model = botocore.loaders.create_loader().load_service_model(service, "service-2")
    shapes: dict[str, Any] = model["shapes"]
    return shapes


@lru_cache(maxsize=32)
def botocore_enum(service: str, shape: str) -> frozenset[str]:
    values = botocore_shapes(service)[shape].get("enum")
    if not values:
        raise KeyError(f"{service} shape {shape} is not an enum")
    return frozenset(values)


def _fail(*problems: str) -> PydanticCustomError:
    return PydanticCustomError(CONSTRAINT_ERROR, "{problems}", {"problems": problems})


#: Java character classes of the AWS model that Python's ``re`` lacks (inside ``[...]``).
_JAVA_CLASSES = {r"\p{Alnum}": "a-zA-Z0-9"}


class StrRule:
    """Length and pattern constraints of one AWS string shape (all failures reported).
    ``pattern`` is the AWS model's, verbatim."""

    __slots__ = ("chars", "display", "max_len", "min_len", "pattern", "regex")

    def __init__(self, min_len: int = 0, max_len: int | None = None, pattern: str | None = None,
                 *, chars: Callable[[str], bool] | None = None, display: str | None = None) -> None:
        self.min_len = min_len
        self.max_len = max_len
        self.pattern = pattern
        python_pattern = pattern
        for java, py in _JAVA_CLASSES.items():
            python_pattern = python_pattern.replace(java, py) if python_pattern else python_pattern
        self.regex = re.compile(python_pattern) if python_pattern else None
        # AWS prints its model patterns with a leading caret (the botocore copy drops it).
        self.display = display or (f"^{pattern}" if pattern else "")
        self.chars = chars

    def __call__(self, value: str) -> str:
        n = len(value)
        if (self.max_len is None or n <= self.max_len) and n >= self.min_len and (
            (self.regex is None or self.regex.fullmatch(value)) and (self.chars is None or self.chars(value))
        ):
            return value
        problems: list[str] = []
        if self.regex is not None and not self.regex.fullmatch(value):
            problems.append(f"Member must satisfy regular expression pattern: {self.display}")
        if self.chars is not None and not self.chars(value):
            problems.append(f"Member must satisfy regular expression pattern: {self.display}")
        if self.max_len is not None and n > self.max_len:
            problems.append(f"Member must have length less than or equal to {self.max_len}")
        if n < self.min_len:
            problems.append(f"Member must have length greater than or equal to {self.min_len}")
        raise _fail(*problems)


class EnumRule:
    """Membership in an AWS enum; big enums come from botocore's model on first use."""

    __slots__ = ("_values", "service", "shape")

    def __init__(self, values: Iterable[str] | None = None, *, service: str = "sagemaker", shape: str = "") -> None:
        self._values: tuple[str, ...] | None = tuple(values) if values is not None else None
        self.service = service
        self.shape = shape

    @property
    def values(self) -> tuple[str, ...]:
        if self._values is None:
            self._values = tuple(botocore_shapes(self.service)[self.shape]["enum"])
        return self._values

    def __call__(self, value: str) -> str:
        values = self.values
        if value in values:
            return value
        raise _fail(f"Member must satisfy enum value set: [{', '.join(values)}]")


def _tag_chars(value: str) -> bool:
    # The model's ``[\p{L}\p{Z}\p{N}_.:/=+\-@]*``: Python's re has no \p{..} classes.
    return all(c in "_.:/=+-@" or unicodedata.category(c)[0] in "LZN" for c in value)


def _timestamp(value: Any) -> Any:
    """botocore sends epoch seconds as a JSON number; ISO-8601 strings are accepted too."""
    if isinstance(value, bool):
        raise PydanticCustomError("aws_type", "Member must be a timestamp", {"expected": "timestamp"})
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                raise PydanticCustomError("aws_type", "Member must be a timestamp", {"expected": "timestamp"}) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return parsed.timestamp()
    raise PydanticCustomError("aws_type", "Member must be a timestamp", {"expected": "timestamp"})


def s(min_len: int = 0, max_len: int | None = None, pattern: str | None = None) -> AfterValidator:
    """Shorthand: the validator of a constrained AWS string."""
    return AfterValidator(StrRule(min_len, max_len, pattern))


def enum(*values: str) -> AfterValidator:
    return AfterValidator(EnumRule(values))


# --- shared string shapes (names follow the botocore shapes) -------------------------------

NAME_PATTERN = r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
S3_PATTERN = r"(https|s3)://([^/]+)/?(.*)"
TrainingJobName = Annotated[str, s(1, 63, NAME_PATTERN)]
TrainingJobArn = Annotated[str, s(0, 256, r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-job/" + NAME_PATTERN)]
ProcessingJobArn = Annotated[str, s(0, 256, r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:processing-job/" + NAME_PATTERN)]
ResourceArn = Annotated[str, s(0, 256, r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:.+")]
RoleArn = Annotated[str, s(20, 2048, r"arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+")]
S3Uri = Annotated[str, s(0, 1024, S3_PATTERN)]
DirectoryPath = Annotated[str, s(0, 4096)]
ImageUri = Annotated[str, s(0, 255)]
KmsKeyId = Annotated[str, s(0, 2048, r"[a-zA-Z0-9:/_-]*")]
ConfigKey = Annotated[str, s(1, 256)]
ConfigValue = Annotated[str, s(0, 256)]
NextToken = Annotated[str, s(0, 8192)]
ExperimentEntityName = Annotated[str, s(1, 120, r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,119}")]
_TAG_DISPLAY = r"^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)"
TagKey = Annotated[str, AfterValidator(StrRule(1, 128, chars=_tag_chars, display=_TAG_DISPLAY))]
TagValue = Annotated[str, AfterValidator(StrRule(0, 256, chars=_tag_chars, display=_TAG_DISPLAY))]

# --- numbers --------------------------------------------------------------------------------

NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveInt = Annotated[int, Field(ge=1)]
Timestamp = Annotated[float, BeforeValidator(_timestamp)]

# --- enums ----------------------------------------------------------------------------------

TrainingInputMode = Annotated[str, enum("Pipe", "File", "FastFile")]
TrainingJobStatus = Annotated[str, enum("InProgress", "Completed", "Failed", "Stopping", "Stopped", "Deleting")]
SecondaryStatus = Annotated[str, enum(
    "Starting", "LaunchingMLInstances", "PreparingTrainingStack", "Downloading", "DownloadingTrainingImage",
    "Training", "Uploading", "Stopping", "Stopped", "MaxRuntimeExceeded", "Completed", "Failed", "Interrupted",
    "MaxWaitTimeExceeded", "Updating", "Restarting", "Pending",
)]
RuleEvaluationStatus = Annotated[str, enum("InProgress", "NoIssuesFound", "IssuesFound", "Error", "Stopping", "Stopped")]
WarmPoolResourceStatus = Annotated[str, enum("Available", "Terminated", "Reused", "InUse")]
TrainingInstanceType = Annotated[str, AfterValidator(EnumRule(shape="TrainingInstanceType"))]
ProcessingInstanceType = Annotated[str, AfterValidator(EnumRule(shape="ProcessingInstanceType"))]
