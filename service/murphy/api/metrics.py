"""Prometheus metrics, one registry per app (no process-global state).

- ``murphy_training_jobs{status}``: jobs by TrainingJobStatus (read from JobService at scrape).
- ``murphy_rule_evaluations{status}``: rules by RuleEvaluationStatus over all jobs (at scrape).
- ``murphy_api_request_duration_seconds{operation}``: API latency histogram.
- ``murphy_api_errors_total{operation,code}``: error responses by AWS error code.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from murphy.jobs.model import RuleEvaluationStatus, TrainingJobStatus
from murphy.jobs.service import JobService

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _JobCollector(Collector):
    def __init__(self, service: JobService) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("murphy_training_jobs", "Training jobs by TrainingJobStatus", labels=["status"])
        counts = self.service.job_counts()
        for status in TrainingJobStatus:
            jobs.add_metric([status.value], counts.get(status.value, 0))
        yield jobs
        rules = GaugeMetricFamily("murphy_rule_evaluations", "Rule evaluations by RuleEvaluationStatus",
                                  labels=["status"])
        outcomes = self.service.rule_outcome_counts()
        for rule_status in RuleEvaluationStatus:
            rules.add_metric([rule_status.value], outcomes.get(rule_status.value, 0))
        yield rules


class ApiMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, service: JobService) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._latency = Histogram("murphy_api_request_duration_seconds", "API request latency by operation",
                                  ["operation"], registry=self.registry, buckets=_BUCKETS)
        self._errors = Counter("murphy_api_errors", "API error responses by operation and error code",
                               ["operation", "code"], registry=self.registry)
        self.registry.register(_JobCollector(service))
        # labels() takes a lock and builds a key each call: keep the children.
        self._children: dict[str, Histogram] = {}
        self._lock = threading.Lock()

    def observe(self, operation: str, seconds: float, error_code: str | None = None) -> None:
        child = self._children.get(operation)
        if child is None:
            with self._lock:
                child = self._children.setdefault(operation, self._latency.labels(operation))
        child.observe(seconds)
        if error_code is not None:
            self._errors.labels(operation, error_code).inc()

    def render(self) -> bytes:
        """The exposition text (calls JobService: run it off the event loop)."""
        return generate_latest(self.registry)
