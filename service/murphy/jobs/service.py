"""``JobService``: the training-job operations behind every API (wire, REST, SDK, CLI).

Requests arrive validated (``murphy.api`` checks shapes and limits); this layer owns what needs
the store: uniqueness, status rules, stopping, tags and log streams. Status changes made here
(a stop) and by the supervisor go through the store's optimistic concurrency (:func:`mutate`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from murphy.exceptions import (
    ConcurrentUpdate,
    JobExists,
    JobNotFound,
    ResourceInUse,
    ResourceNotFoundException,
    ValidationException,
)
from murphy.jobs.describe import describe, summary
from murphy.jobs.model import JobRecord, RuleEvaluationStatus, RuleState, SecondaryStatus
from murphy.jobs.naming import (
    name_from_training_job_arn,
    processing_job_arn,
    rule_job_name,
    training_job_arn,
)
from murphy.jobs.plans import rule_result_uri
from murphy.runtimes.base import Handle, LogPage, Runtime
from murphy.settings import Settings
from murphy.store.base import JobQuery, JobStore

TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"
PROCESSING_LOG_GROUP = "/aws/sagemaker/ProcessingJobs"
NOT_FOUND = "Requested resource not found."


@dataclass(frozen=True)
class LogStream:
    name: str
    creation_ms: int
    first_event_ms: int | None
    last_event_ms: int | None
    stored_bytes: int


def mutate(store: JobStore, name: str, change: Callable[[JobRecord], bool], attempts: int = 20) -> JobRecord:
    """Read-modify-write with retry on :class:`ConcurrentUpdate`; ``change`` returns whether it
    changed anything (nothing is written otherwise)."""
    for _ in range(attempts):
        record = store.get(name)
        if not change(record):
            return record
        try:
            return store.update(record)
        except ConcurrentUpdate:
            continue
    raise ConcurrentUpdate(name, -1)


def request_stop(record: JobRecord, reason: str, now: float, *, secondary_message: str | None = None) -> bool:
    """Mark a running job as stopping (the supervisor signals the containers)."""
    if record.is_terminal() or record.secondary == SecondaryStatus.Stopping:
        return False
    record.stop_reason = reason
    record.transition(SecondaryStatus.Stopping, secondary_message or reason, now)
    for rule in record.rules:
        if rule.status == RuleEvaluationStatus.InProgress:
            rule.set_status(RuleEvaluationStatus.Stopping, None, now)
    return True


class JobService:
    def __init__(self, store: JobStore, runtime: Runtime, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.runtime = runtime
        self.settings = settings
        self.clock = clock
        #: Called after a change the supervisor should act on at once (set by the supervisor).
        self.on_change: Callable[[], None] = lambda: None

    # --- training jobs -----------------------------------------------------------------------

    def create_training_job(self, request: dict[str, Any], *, account: str, region: str) -> str:
        name = request["TrainingJobName"]
        self._check_instance_count(request)
        arn = training_job_arn(region, account, name)
        now = self.clock()
        spec = {k: v for k, v in request.items() if k not in ("TrainingJobName", "Tags")}
        record = JobRecord.new(name, arn, account, region, spec, now, "Starting the training job")
        record.tags = [dict(t) for t in request.get("Tags", []) or []]
        for cfg in spec.get("DebugRuleConfigurations", []) or []:
            rname = cfg["RuleConfigurationName"]
            record.rules.append(
                RuleState(rname, processing_job_arn(region, account, rule_job_name(name, rname)), "debug",
                          RuleEvaluationStatus.InProgress, None, now, result_uri=rule_result_uri(record, rname))
            )
        for cfg in spec.get("ProfilerRuleConfigurations", []) or []:
            rname = cfg["RuleConfigurationName"]
            record.rules.append(
                RuleState(rname, processing_job_arn(region, account, rule_job_name(name, rname)), "profiler",
                          RuleEvaluationStatus.InProgress, None, now)
            )
        try:
            self.store.create(record)
        except JobExists:
            raise ResourceInUse(
                "Training job names must be unique within an AWS account and region, and a training job "
                f"with this name already exists ({arn})"
            ) from None
        self.on_change()
        return arn

    def _check_instance_count(self, request: dict[str, Any]) -> None:
        count = (request.get("ResourceConfig") or {}).get("InstanceCount")
        cap = self.settings.max_instances(getattr(self.runtime, "name", None))
        if isinstance(count, int) and count > cap:
            runtime = getattr(self.runtime, "name", self.settings.runtime)
            where = "its pods are the cluster's" if runtime == "kubernetes" else "every host runs on this machine"
            raise ValidationException(
                f"ResourceConfig.InstanceCount {count} exceeds the limit of {cap} hosts per job on murphy's "
                f"{runtime} runtime ({where}); ask for at most {cap}, or raise "
                f"{self.settings.max_instances_variable(runtime)}.")

    def _get(self, name: str, account: str | None = None) -> JobRecord:
        """The record; another account's job is exactly as missing as one that does not exist."""
        try:
            record = self.store.get(name)
        except JobNotFound:
            raise ValidationException(NOT_FOUND) from None
        if account is not None and record.account != account:
            raise ValidationException(NOT_FOUND)
        return record

    def describe_training_job(self, name: str, *, account: str | None = None) -> dict[str, Any]:
        return describe(self._get(name, account))

    def stop_training_job(self, name: str, reason: str = "Stopped by the user (StopTrainingJob)", *,
                          account: str | None = None) -> None:
        def change(rec: JobRecord) -> bool:
            if account is not None and rec.account != account:
                raise JobNotFound(name)
            if rec.is_terminal():
                raise ValidationException(f"The request was rejected because the training job is in status {rec.status.value}.")
            return request_stop(rec, reason, self.clock(), secondary_message="Stopping the training job")

        try:
            mutate(self.store, name, change)
        except JobNotFound:
            raise ValidationException(NOT_FOUND) from None
        self.on_change()

    def list_training_jobs(self, query: JobQuery) -> tuple[list[dict[str, Any]], bool]:
        limit = query.limit
        records = self.store.query(replace(query, limit=None if limit is None else limit + 1))
        more = limit is not None and len(records) > limit
        return [summary(r) for r in records[:limit]], more

    # --- tags --------------------------------------------------------------------------------

    def _by_arn(self, arn: str, account: str | None = None) -> JobRecord:
        record = self._get(name_from_training_job_arn(arn), account)
        if record.arn != arn:
            raise ValidationException(NOT_FOUND)
        return record

    def add_tags(self, resource_arn: str, tags: list[dict[str, str]], *,
                 account: str | None = None) -> list[dict[str, str]]:
        name = self._by_arn(resource_arn, account).name

        def change(rec: JobRecord) -> bool:
            merged = {t["Key"]: t["Value"] for t in rec.tags}
            merged.update({t["Key"]: t.get("Value", "") for t in tags})
            if len(merged) > 50:
                raise ValidationException("Tags cannot exceed 50 per resource.")
            rec.tags = [{"Key": k, "Value": v} for k, v in merged.items()]
            return True

        mutate(self.store, name, change)
        return [dict(t) for t in tags]

    def list_tags(self, resource_arn: str, *, account: str | None = None) -> list[dict[str, str]]:
        return [dict(t) for t in self._by_arn(resource_arn, account).tags]

    def delete_tags(self, resource_arn: str, keys: list[str], *, account: str | None = None) -> None:
        name = self._by_arn(resource_arn, account).name

        def change(rec: JobRecord) -> bool:
            kept = [t for t in rec.tags if t["Key"] not in set(keys)]
            if len(kept) == len(rec.tags):
                return False
            rec.tags = kept
            return True

        mutate(self.store, name, change)

    # --- logs (CloudWatch Logs subset) ---------------------------------------------------------

    def _streams(self, group: str, prefix: str, account: str | None = None) -> list[tuple[str, JobRecord, Handle]]:
        if group not in (TRAINING_LOG_GROUP, PROCESSING_LOG_GROUP):
            raise ResourceNotFoundException("The specified log group does not exist.")
        job_part = prefix.split("/", 1)[0]
        if group == TRAINING_LOG_GROUP:
            candidates = self.store.query(JobQuery(name_contains=job_part or None, account=account))
        else:
            # A rule job's name starts with its training job's first 26 characters.
            candidates = self.store.query(JobQuery(name_contains=job_part[:26].rstrip("-") or None, account=account))
        out: list[tuple[str, JobRecord, Handle]] = []
        for rec in candidates:
            epoch = int(rec.creation_time)
            if group == TRAINING_LOG_GROUP:
                # One stream per host, as on SageMaker: <job>/algo-<i>-<epoch>.
                out.extend((f"{rec.name}/algo-{i}-{epoch}", rec, handle)
                           for i, handle in enumerate(rec.training_handles(), 1))
            else:
                out.extend(
                    (f"{rule.job_arn.rsplit('/', 1)[1]}/algo-1-{epoch}", rec, rule.handle)
                    for rule in rec.rules
                    if rule.handle is not None
                )
        return sorted((s for s in out if s[0].startswith(prefix)), key=lambda s: s[0])

    def log_streams(self, group: str, prefix: str = "", *, account: str | None = None) -> list[LogStream]:
        return [LogStream(name, int(rec.creation_time * 1000), None, None, 0)
                for name, rec, _ in self._streams(group, prefix, account)]

    def get_log_events(self, group: str, stream: str, cursor: int = 0, limit: int = 10_000, *,
                       account: str | None = None) -> LogPage:
        for name, _, handle in self._streams(group, stream.split("/", 1)[0], account):
            if name == stream:
                return self.runtime.read_logs(handle, cursor, limit)
        raise ResourceNotFoundException("The specified log stream does not exist.")

    # --- metrics -----------------------------------------------------------------------------

    def job_counts(self) -> dict[str, int]:
        return self.store.counts_by_status()

    def rule_outcome_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for rec in self.store.query(JobQuery()):
            for rule in rec.rules:
                counts[rule.status.value] = counts.get(rule.status.value, 0) + 1
        return counts
