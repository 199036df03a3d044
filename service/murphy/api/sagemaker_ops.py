"""SageMaker operations: validate the request, call JobService, shape the response.

Each operation is a plain (blocking) function ``(service, caller, body) -> response dict``; the
wire and REST layers run it off the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from murphy.api import pagination
from murphy.api.caller import Caller
from murphy.api.shapes.requests import (
    AddTagsInput,
    CreateTrainingJobRequest,
    DeleteTagsInput,
    DescribeTrainingJobRequest,
    ListTagsInput,
    ListTrainingJobsRequest,
    StopTrainingJobRequest,
)
from murphy.api.validation import parse
from murphy.jobs.model import TrainingJobStatus
from murphy.jobs.service import JobService
from murphy.store.base import JobQuery

Operation = Callable[[JobService, Caller, dict[str, Any]], dict[str, Any]]

DEFAULT_PAGE = 10
DEFAULT_TAGS_PAGE = 50
_SORT_BY: dict[str, Literal["Name", "CreationTime", "Status"]] = {
    "Name": "Name", "CreationTime": "CreationTime", "Status": "Status",
}
_SORT_ORDER: dict[str, Literal["Ascending", "Descending"]] = {"Ascending": "Ascending", "Descending": "Descending"}
_MURPHY_STATUSES = {s.value: s for s in TrainingJobStatus}


def create_training_job(service: JobService, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
    req = parse(CreateTrainingJobRequest, body)
    # Only what the client sent (no defaults, no explicit nulls): the record stores it verbatim.
    request = req.model_dump(exclude_unset=True, exclude_none=True)
    arn = service.create_training_job(request, account=caller.account, region=caller.region)
    return {"TrainingJobArn": arn}


def describe_training_job(service: JobService, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
    req = parse(DescribeTrainingJobRequest, body)
    return service.describe_training_job(req.TrainingJobName, account=caller.account)


def stop_training_job(service: JobService, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
    req = parse(StopTrainingJobRequest, body)
    service.stop_training_job(req.TrainingJobName, account=caller.account)
    return {}


def list_training_jobs(service: JobService, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
    """AWS semantics except one: AWS applies MaxResults before StatusEquals (its documented
    quirk); murphy filters first, so every page is full until the last."""
    req = parse(ListTrainingJobsRequest, body)
    filters = req.model_dump(exclude={"NextToken", "MaxResults"}, exclude_none=True)
    scope = pagination.scope_of("ListTrainingJobs", filters)
    offset = pagination.decode(req.NextToken, scope) if req.NextToken else 0
    limit = req.MaxResults or DEFAULT_PAGE
    status = _MURPHY_STATUSES.get(req.StatusEquals) if req.StatusEquals else None
    # murphy has no warm pools, no training plans and never deletes: such filters match nothing.
    if (req.StatusEquals and status is None) or req.WarmPoolStatusEquals or req.TrainingPlanArnEquals:
        return {"TrainingJobSummaries": []}
    query = JobQuery(
        name_contains=req.NameContains or None,
        status_equals=status,
        creation_time_after=req.CreationTimeAfter,
        creation_time_before=req.CreationTimeBefore,
        last_modified_time_after=req.LastModifiedTimeAfter,
        last_modified_time_before=req.LastModifiedTimeBefore,
        sort_by=_SORT_BY[req.SortBy or "CreationTime"],
        sort_order=_SORT_ORDER[req.SortOrder or "Ascending"],
        offset=offset,
        limit=limit,
        account=caller.account,
    )
    summaries, more = service.list_training_jobs(query)
    out: dict[str, Any] = {"TrainingJobSummaries": summaries}
    if more:
        out["NextToken"] = pagination.encode(offset + len(summaries), scope)
    return out


def add_tags(service: JobService, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
    req = parse(AddTagsInput, body)
    tags = service.add_tags(req.ResourceArn, [t.model_dump() for t in req.Tags], account=caller.account)
    return {"Tags": tags}


def list_tags(service: JobService, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
    req = parse(ListTagsInput, body)
    scope = pagination.scope_of("ListTags", req.ResourceArn)
    offset = pagination.decode(req.NextToken, scope) if req.NextToken else 0
    limit = req.MaxResults or DEFAULT_TAGS_PAGE
    tags = service.list_tags(req.ResourceArn, account=caller.account)
    out: dict[str, Any] = {"Tags": tags[offset:offset + limit]}
    if offset + limit < len(tags):
        out["NextToken"] = pagination.encode(offset + limit, scope)
    return out


def delete_tags(service: JobService, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
    req = parse(DeleteTagsInput, body)
    service.delete_tags(req.ResourceArn, list(req.TagKeys), account=caller.account)
    return {}


OPERATIONS: dict[str, Operation] = {
    "CreateTrainingJob": create_training_job,
    "DescribeTrainingJob": describe_training_job,
    "StopTrainingJob": stop_training_job,
    "ListTrainingJobs": list_training_jobs,
    "AddTags": add_tags,
    "ListTags": list_tags,
    "DeleteTags": delete_tags,
}
