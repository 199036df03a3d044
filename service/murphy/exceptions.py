"""Every error murphy raises, as one tree rooted at :class:`MurphyError`.

The data-availability and rule names are smdebug's own (``smdebug.exceptions``), so a notebook or
a custom rule that catches ``StepUnavailable`` or ``NoMoreData`` works unchanged. Each error passes
its message to ``super().__init__`` (smdebug overrode ``__str__``, which loses it in tracebacks and
pickling).

    MurphyError
    ├── StorageError ── ObjectNotFound
    ├── TensorIOError ── CorruptRecord, CorruptIndex, CorruptCollections, UnsupportedDType
    ├── HookError
    └── SMDebugError                      (smdebug-compatible names: murphy.smdebug_exceptions)
        ├── StepNotYetAvailable, StepUnavailable, NoMoreData
        ├── TensorUnavailable, TensorUnavailableForStep, ShapeUnavailableForStep
        ├── MissingCollectionFiles, IndexReaderException, InvalidWorker
        ├── RuleEvaluationConditionMet, InsufficientInformationForRuleInvocation
        ├── InvalidCollectionConfiguration
        └── SMDebugTypeError, SMDebugValueError, SMDebugRuntimeError, ...
"""

from __future__ import annotations

from murphy._error_root import MurphyError as MurphyError
from murphy.smdebug_exceptions import (
    IndexReaderException as IndexReaderException,
)
from murphy.smdebug_exceptions import (
    InsufficientInformationForRuleInvocation as InsufficientInformationForRuleInvocation,
)
from murphy.smdebug_exceptions import (
    InvalidCollectionConfiguration as InvalidCollectionConfiguration,
)
from murphy.smdebug_exceptions import (
    InvalidWorker as InvalidWorker,
)
from murphy.smdebug_exceptions import (
    MissingCollectionFiles as MissingCollectionFiles,
)
from murphy.smdebug_exceptions import (
    NoMoreData as NoMoreData,
)
from murphy.smdebug_exceptions import (
    NoMoreProfilerData as NoMoreProfilerData,
)
from murphy.smdebug_exceptions import (
    RuleEvaluationConditionMet as RuleEvaluationConditionMet,
)
from murphy.smdebug_exceptions import (
    ShapeUnavailableForStep as ShapeUnavailableForStep,
)
from murphy.smdebug_exceptions import (
    SMDebugCustomerError as SMDebugCustomerError,
)
from murphy.smdebug_exceptions import (  # smdebug-compatible names, defined there
    SMDebugError as SMDebugError,
)
from murphy.smdebug_exceptions import (
    SMDebugNotImplementedError as SMDebugNotImplementedError,
)
from murphy.smdebug_exceptions import (
    SMDebugRuntimeError as SMDebugRuntimeError,
)
from murphy.smdebug_exceptions import (
    SMDebugTypeError as SMDebugTypeError,
)
from murphy.smdebug_exceptions import (
    SMDebugValueError as SMDebugValueError,
)
from murphy.smdebug_exceptions import (
    StepNotYetAvailable as StepNotYetAvailable,
)
from murphy.smdebug_exceptions import (
    StepUnavailable as StepUnavailable,
)
from murphy.smdebug_exceptions import (
    TensorUnavailable as TensorUnavailable,
)
from murphy.smdebug_exceptions import (
    TensorUnavailableForStep as TensorUnavailableForStep,
)

# --- storage -------------------------------------------------------------------------------


class StorageError(MurphyError):
    """An object store operation failed (backend errors are mapped to this at the boundary)."""


class ObjectNotFound(StorageError, KeyError):
    """The key does not exist in the store."""

    def __init__(self, key: str) -> None:
        super().__init__(f"object not found: {key}")
        self.key = key

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0])


# --- tensor files --------------------------------------------------------------------------


class TensorIOError(MurphyError):
    """Root of the on-disk format errors."""


class CorruptRecord(TensorIOError):
    """A TFRecord is damaged: bad length CRC, bad footer, or an undecodable payload."""


class TruncatedRecord(TensorIOError):
    """A record ends before its declared length: an incomplete write, not corruption."""


class CorruptIndex(TensorIOError):
    """An index file is not the JSON schema smdebug writes."""


class CorruptCollections(TensorIOError):
    """A collections file is not the JSON schema smdebug writes."""


class UnsupportedDType(TensorIOError, TypeError):
    """A tensor's dtype has no TensorProto mapping."""


# --- hook ----------------------------------------------------------------------------------


class HookError(MurphyError):
    """The hook was configured wrongly (raised at construction, never inside a training step)."""


# --- service (control plane) -----------------------------------------------------------------
# Wire errors carry SageMaker's exact codes as class names; ``murphy.api`` renders every one of
# them in one place as ``{"__type": code, "message": ...}`` with ``http_status``.


class ServiceError(MurphyError):
    """An error a client of the control plane sees; ``code`` is the AWS wire code."""

    http_status = 400

    @property
    def code(self) -> str:
        return type(self).__name__

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code


class ValidationException(ServiceError):
    """Bad input, an unknown job ("Requested resource not found.") or an illegal request."""


class ResourceNotFound(ServiceError):
    pass


class ResourceInUse(ServiceError):
    pass


class ResourceLimitExceeded(ServiceError):
    pass


class ThrottlingException(ServiceError):
    pass


class InternalFailure(ServiceError):
    http_status = 500


class JobError(MurphyError):
    """Root of the job-domain errors that are not client errors."""


class IllegalTransition(JobError):
    """A status change the job state machine does not allow."""


class StoreError(MurphyError):
    """Root of the job-store errors (backend errors are mapped to these at the boundary)."""


class JobNotFound(StoreError, KeyError):
    def __init__(self, name: str) -> None:
        super().__init__(f"training job not found: {name}")
        self.name = name

    def __str__(self) -> str:
        return str(self.args[0])


class JobExists(StoreError):
    def __init__(self, name: str) -> None:
        super().__init__(f"training job already exists: {name}")
        self.name = name


class ConcurrentUpdate(StoreError):
    """The record changed since it was read (optimistic concurrency): re-read and retry."""

    def __init__(self, name: str, expected: int) -> None:
        super().__init__(f"training job {name} changed since version {expected}")
        self.name = name
        self.expected = expected


class RuntimeBackendError(MurphyError):
    """A runtime could not launch, inspect or stop a container."""


class ResourceNotFoundException(ServiceError):
    """CloudWatch Logs' code for an unknown log group or stream."""


class InvalidParameterException(ServiceError):
    """CloudWatch Logs' code for a bad parameter."""


# --- job store backends (murphy.store.sql maps database errors to these in one place) --------


class StoreUnavailable(StoreError):
    """The database could not be reached, or stayed locked/busy past the timeout: retry later."""


class StoreSchemaError(StoreError):
    """The database holds a schema this murphy does not know (e.g. written by a newer version)."""


# --- wire protocol (murphy.api) ----------------------------------------------------------------


class SerializationException(ServiceError):
    """The body is not a JSON object or the Content-Type is not AWS JSON (client error)."""


class UnknownOperationException(ServiceError):
    """X-Amz-Target is missing or names an operation murphy does not serve."""


class RequestEntityTooLargeException(ServiceError):
    """The body is larger than ``Settings.max_body_bytes``."""

    http_status = 413


class ServiceUnavailable(ServiceError):
    """A dependency (the job store) is down for now; botocore retries 503s."""

    http_status = 503


# --- authentication (murphy.auth): AWS's own codes; 400 on the wire, 403 on the REST mirror ----


class AuthFailure(ServiceError):
    """A request that is not signed as murphy's access keys require."""


class MissingAuthenticationTokenException(AuthFailure):
    pass


class IncompleteSignatureException(AuthFailure):
    pass


class InvalidSignatureException(AuthFailure):
    pass


class UnrecognizedClientException(AuthFailure):
    pass


class ExpiredTokenException(AuthFailure):
    pass


class AccessDeniedException(AuthFailure):
    pass


# --- events (murphy.events and the store's outbox/subscription tables) -------------------------


class SubscriptionNotFound(StoreError, KeyError):
    def __init__(self, key: str) -> None:
        super().__init__(f"event subscription not found: {key}")
        self.key = key

    def __str__(self) -> str:
        return str(self.args[0])


class SubscriptionExists(StoreError):
    def __init__(self, name: str) -> None:
        super().__init__(f"an event subscription named {name} already exists")
        self.name = name


class AccessKeyNotFound(StoreError, KeyError):
    def __init__(self, key: str) -> None:
        super().__init__(f"access key not found: {key}")
        self.key = key

    def __str__(self) -> str:
        return str(self.args[0])


class AccessKeyExists(StoreError):
    def __init__(self, key: str) -> None:
        super().__init__(f"an access key with id {key} already exists")
        self.key = key


class DeliveryError(MurphyError):
    """One attempt to deliver an event to a target failed (the dispatcher retries it)."""
