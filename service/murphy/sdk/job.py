"""``TrainingJob`` (an estimator's ``latest_training_job``) and ``UnexpectedStatusException``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from murphy.sdk.watch import LiveView, PlainView, make_view, rule_statuses, summary_lines, watch_job

if TYPE_CHECKING:
    from murphy.sdk.session import Session

log = logging.getLogger("murphy.sdk")


class UnexpectedStatusException(ValueError):
    """The job ended in a status other than those allowed (the SageMaker SDK's exception)."""

    def __init__(self, message: str, allowed_statuses: list[str], actual_status: str) -> None:
        self.allowed_statuses = allowed_statuses
        self.actual_status = actual_status
        super().__init__(message)


def check_job_status(description: dict[str, Any]) -> None:
    """Like the SDK: ``Stopped`` logs a warning, anything but ``Completed`` raises."""
    status = description["TrainingJobStatus"]
    if status == "Stopped":
        log.warning(
            "Job ended with status 'Stopped' rather than 'Completed'. This could mean the job timed out or "
            "stopped early for some other reason: Consider checking whether it completed as you expect."
        )
    elif status != "Completed":
        reason = description.get("FailureReason", "(No reason provided)")
        raise UnexpectedStatusException(
            f"Error for Training job {description['TrainingJobName']}: {status}. Reason: {reason}",
            allowed_statuses=["Completed", "Stopped"],
            actual_status=status,
        )


class TrainingJob:
    """A training job on a murphy server, by name."""

    def __init__(self, session: Session, job_name: str, debugger_artifacts_path: str | None = None) -> None:
        self.sagemaker_session = session
        self.job_name = job_name
        self.debugger_artifacts_path = debugger_artifacts_path

    @property
    def name(self) -> str:
        return self.job_name

    def describe(self) -> dict[str, Any]:
        """DescribeTrainingJob's body."""
        body: dict[str, Any] = self.sagemaker_session.sagemaker_client.describe_training_job(TrainingJobName=self.job_name)
        body.pop("ResponseMetadata", None)
        return body

    def rule_job_summary(self) -> list[dict[str, Any]]:
        """DebugRuleEvaluationStatuses + ProfilerRuleEvaluationStatuses."""
        return rule_statuses(self.describe())

    def stop(self) -> None:
        self.sagemaker_session.sagemaker_client.stop_training_job(TrainingJobName=self.job_name)

    def wait(self, logs: bool | str = True, *, poll_s: float = 0.5, view: PlainView | LiveView | None = None,
             prompt: Callable[[str], str] = input) -> dict[str, Any]:
        """Follow the job to its end (log, status transitions, rule box), print a summary, and
        raise :class:`UnexpectedStatusException` if it Failed. ``logs``: True/"All", "Training"
        (log only), "Rules" (rule box only), False/"None" (quiet)."""
        quiet = logs in (False, "None")
        show_logs = logs in (True, "All", "Training")
        show_rules = logs in (True, "All", "Rules")
        session = self.sagemaker_session
        view = view or make_view()
        description = watch_job(
            session.sagemaker_client, session.logs_client, self.job_name,
            show_logs=show_logs, show_rules=show_rules, poll_s=poll_s, view=view, prompt=prompt,
        )
        if not quiet:
            view.out.write("\n" + "\n".join(summary_lines(description, self.debugger_artifacts_path)) + "\n")
            view.out.flush()
        check_job_status(description)
        return description
