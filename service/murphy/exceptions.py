"""Every error murphy raises, as one tree rooted at :class:`MurphyError`.

The data-availability and rule names are smdebug's own (``smdebug.exceptions``), so a notebook or
a custom rule that catches ``StepUnavailable`` or ``NoMoreData`` works unchanged. Each error passes
its message to ``super().__init__`` (smdebug overrode ``__str__``, which loses it in tracebacks and
pickling).

    MurphyError
    ├── StorageError ── ObjectNotFound
    ├── TensorIOError ── CorruptRecord, CorruptIndex, CorruptCollections, UnsupportedDType
    ├── HookError
    └── SMDebugError                      (smdebug-compatible names)
        ├── StepNotYetAvailable, StepUnavailable, NoMoreData
        ├── TensorUnavailable, TensorUnavailableForStep, ShapeUnavailableForStep
        ├── MissingCollectionFiles, IndexReaderException, InvalidWorker
        ├── RuleEvaluationConditionMet, InsufficientInformationForRuleInvocation
        ├── InvalidCollectionConfiguration
        └── SMDebugTypeError, SMDebugValueError, SMDebugRuntimeError, ...
"""

from __future__ import annotations

from typing import Any


class MurphyError(Exception):
    """Root of every murphy error."""


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


# --- smdebug-compatible ----------------------------------------------------------------------


class SMDebugError(MurphyError):
    """Root of the errors that carry smdebug's names."""


class SMDebugTypeError(SMDebugError, TypeError):
    pass


class SMDebugValueError(SMDebugError, ValueError):
    pass


class SMDebugRuntimeError(SMDebugError, RuntimeError):
    pass


class SMDebugNotImplementedError(SMDebugError, NotImplementedError):
    pass


class SMDebugCustomerError(SMDebugError):
    pass


def _mode_name(mode: Any) -> str:
    """smdebug formats modes by name ("TRAIN"); None stands for GLOBAL, smdebug's default."""
    return "GLOBAL" if mode is None else str(getattr(mode, "name", mode))


class StepNotYetAvailable(SMDebugError):
    """The step may still be written: training has not passed it yet."""

    def __init__(self, step: int, mode: Any) -> None:
        super().__init__(f"Step {step} of mode {_mode_name(mode)} not yet available")
        self.step = step
        self.mode = mode


class StepUnavailable(SMDebugError):
    """The step was skipped: training passed it without saving it."""

    def __init__(self, step: int, mode: Any) -> None:
        super().__init__(f"Step {step} of mode {_mode_name(mode)} is not available as it was not saved")
        self.step = step
        self.mode = mode


class NoMoreData(SMDebugError):
    """Training has ended and the step lies beyond the last one saved."""

    def __init__(self, step: int, mode: Any, last_step: int | None) -> None:
        self.msg = (
            f"Looking for step {step} of mode {_mode_name(mode)} and reached end of training. "
            f"Max step available is {last_step}"
        )
        super().__init__(self.msg)
        self.step = step
        self.mode = mode
        self.last_step = last_step


class TensorUnavailable(SMDebugError):
    """The tensor was never saved."""

    def __init__(self, tname: str) -> None:
        super().__init__(f"Tensor {tname} was not saved.")
        self.tname = tname


class TensorUnavailableForStep(SMDebugError):
    """The step exists but this tensor (or this reduction of it) was not saved at it."""

    def __init__(self, tname: str, step: int, mode: Any = None, has_reductions: bool = False) -> None:
        # smdebug's exact text, the missing space before "This" included.
        msg = (
            f"Value for tensor {tname} is not available for step {step} with mode {_mode_name(mode)} "
            "as it was not saved."
        )
        if has_reductions:
            msg += "This tensor has reductions saved for this step. You might want to query for the reductions."
        super().__init__(msg)
        self.tname = tname
        self.step = step
        self.mode = mode
        self.has_reductions = has_reductions


class ShapeUnavailableForStep(SMDebugError):
    def __init__(self, tname: str, step: int, mode: Any = None) -> None:
        super().__init__(
            f"Shape for tensor {tname} is not available for step {step} with mode {_mode_name(mode)} "
            "as it was not saved."
        )
        self.tname = tname
        self.step = step
        self.mode = mode


class MissingCollectionFiles(SMDebugError):
    def __init__(
        self, message: str = "Training job has ended. All the collection files could not be loaded"
    ) -> None:
        super().__init__(message)


class IndexReaderException(SMDebugError):
    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class InvalidWorker(SMDebugError):
    def __init__(self, worker: str) -> None:
        super().__init__(f"Invalid Worker: {worker}")
        self.worker = worker


class InvalidCollectionConfiguration(SMDebugError):
    pass


class RuleEvaluationConditionMet(SMDebugError):
    """smdebug signals a rule finding by raising this; murphy's engine returns an outcome instead."""

    def __init__(self, rule_name: str, step: int, end_of_rule: bool = False) -> None:
        super().__init__(f"Evaluation of the rule {rule_name} at step {step} resulted in the condition being met")
        self.rule_name = rule_name
        self.step = step
        self.end_of_rule = end_of_rule


class InsufficientInformationForRuleInvocation(SMDebugError):
    def __init__(self, rule_name: str = "", message: str = "") -> None:
        super().__init__(f"Insufficient information to invoke rule {rule_name}: {message}")
        self.rule_name = rule_name
        self.message = message


class NoMoreProfilerData(SMDebugError):
    def __init__(self, timestamp: int = 0) -> None:
        self.msg = f"Looking for timestamp {timestamp} and reached end of training."
        super().__init__(self.msg)
        self.timestamp = timestamp


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
