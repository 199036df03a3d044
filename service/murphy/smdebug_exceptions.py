"""smdebug's own exception names (``smdebug.exceptions``), as murphy raises them: a notebook or a
custom rule that catches ``StepUnavailable`` or ``NoMoreData`` works unchanged. Messages are
smdebug's exact texts. Re-exported by :mod:`murphy.exceptions`, the one place callers import from.
"""

from __future__ import annotations

from typing import Any

from murphy._error_root import MurphyError


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
