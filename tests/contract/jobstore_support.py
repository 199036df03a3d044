"""Records and databases for the job-store contract tests (test_job_store*.py)."""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from murphy.jobs.model import JobRecord, SecondaryStatus, TrainingJobStatus

S = SecondaryStatus
# Secondary-status paths from Starting to each primary status.
_PATHS: dict[TrainingJobStatus, list[SecondaryStatus]] = {
    TrainingJobStatus.InProgress: [],
    TrainingJobStatus.Completed: [S.Training, S.Uploading, S.Completed],
    TrainingJobStatus.Failed: [S.Failed],
    TrainingJobStatus.Stopping: [S.Stopping],
    TrainingJobStatus.Stopped: [S.Stopping, S.Stopped],
}


def make_record(name: str, created: float = 1000.0,
                status: TrainingJobStatus = TrainingJobStatus.InProgress,
                modified: float | None = None) -> JobRecord:
    rec = JobRecord.new(name, f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name.lower()}",
                        "123456789012", "us-east-1", {"TrainingJobName": name}, now=created)
    for i, to in enumerate(_PATHS[status]):
        rec.transition(to, f"step {i}", now=created + i + 1)
    if modified is not None:
        rec.last_modified_time = modified
    return rec


def pg_schema_url(postgres_url: str) -> str:
    """A new, empty schema in the session database, as a URL whose search_path selects it."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(postgres_url, poolclass=NullPool)
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    engine.dispose()
    url = sa.make_url(postgres_url).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


def names(records: list[JobRecord]) -> list[str]:
    return [r.name for r in records]
