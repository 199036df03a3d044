"""``murphy jobs list | describe | stop | logs``: a person's view of a murphy server.

Everything goes through the stock boto3 clients against the server's SageMaker and CloudWatch
Logs endpoints (no private back door), so what this prints is what any SageMaker client sees.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from typing import Any

TERMINAL = {"Completed", "Failed", "Stopped"}
LOG_GROUP = "/aws/sagemaker/TrainingJobs"


def _client(args: argparse.Namespace, service: str) -> Any:
    import boto3

    endpoint = args.endpoint or os.environ.get("MURPHY_ENDPOINT") or "http://127.0.0.1:8080"
    session: Any = boto3.session.Session()
    creds = session.get_credentials()
    kwargs: dict[str, Any] = {}
    if creds is None:  # botocore refuses to send unsigned; murphy does not check signatures yet
        kwargs = {"aws_access_key_id": "murphy", "aws_secret_access_key": "murphy"}
    region = session.region_name or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return session.client(service, endpoint_url=endpoint, region_name=region, **kwargs)


def _when(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    return str(value or "")


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False)


def cmd_list(args: argparse.Namespace) -> int:
    from rich.table import Table

    client = _client(args, "sagemaker")
    kwargs: dict[str, Any] = {"SortBy": "CreationTime", "SortOrder": "Descending"}
    if args.status:
        kwargs["StatusEquals"] = args.status
    if args.name_contains:
        kwargs["NameContains"] = args.name_contains
    rows: list[dict[str, Any]] = []
    for page in client.get_paginator("list_training_jobs").paginate(**kwargs, PaginationConfig={"MaxItems": args.max}):
        rows.extend(page["TrainingJobSummaries"])
    table = Table(title=f"training jobs ({len(rows)})")
    for col in ("Name", "Status", "Secondary status", "Created", "Ended"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["TrainingJobName"], r["TrainingJobStatus"], r.get("SecondaryStatus", ""),
                      _when(r.get("CreationTime")), _when(r.get("TrainingEndTime")))
    _console().print(table)
    return 0


def _render(job: dict[str, Any]) -> None:
    from rich.table import Table

    console = _console()
    console.print(f"[bold]{job['TrainingJobName']}[/bold]  {job['TrainingJobStatus']} / {job['SecondaryStatus']}")
    console.print(f"  arn: {job['TrainingJobArn']}")
    console.print(f"  image: {job.get('AlgorithmSpecification', {}).get('TrainingImage', '')}")
    console.print(f"  created: {_when(job.get('CreationTime'))}   ended: {_when(job.get('TrainingEndTime'))}")
    if job.get("FailureReason"):
        console.print(f"  [red]failure:[/red] {job['FailureReason']}")
    if job.get("DebugHookConfig"):
        path = job["DebugHookConfig"]["S3OutputPath"].rstrip("/")
        console.print(f"  tensors: {path}/{job['TrainingJobName']}/debug-output")
    transitions = Table(title="status transitions")
    for col in ("Status", "Start", "Message"):
        transitions.add_column(col)
    for t in job.get("SecondaryStatusTransitions", []):
        transitions.add_row(t["Status"], _when(t.get("StartTime")), t.get("StatusMessage", ""))
    console.print(transitions)
    statuses = job.get("DebugRuleEvaluationStatuses", []) + job.get("ProfilerRuleEvaluationStatuses", [])
    if statuses:
        rules = Table(title="Debugger rule status")
        for col in ("Rule", "Status", "Details"):
            rules.add_column(col)
        for r in statuses:
            rules.add_row(r["RuleConfigurationName"], r["RuleEvaluationStatus"], r.get("StatusDetails", ""))
        console.print(rules)


def _wait(client: Any, name: str) -> dict[str, Any]:
    console = _console()
    with console.status(f"waiting for {name}…") as status:
        while True:
            job: dict[str, Any] = client.describe_training_job(TrainingJobName=name)
            rules = ", ".join(f"{r['RuleConfigurationName']}: {r['RuleEvaluationStatus']}" for r in job.get("DebugRuleEvaluationStatuses", []))
            status.update(f"{name}: {job['TrainingJobStatus']} / {job['SecondaryStatus']}" + (f"  ({rules})" if rules else ""))
            if job["TrainingJobStatus"] in TERMINAL:
                return job
            time.sleep(0.5)


def cmd_describe(args: argparse.Namespace) -> int:
    client = _client(args, "sagemaker")
    job = _wait(client, args.name) if args.wait else client.describe_training_job(TrainingJobName=args.name)
    if args.json:
        job.pop("ResponseMetadata", None)
        print(json.dumps(job, default=str, indent=2))
    else:
        _render(job)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    client = _client(args, "sagemaker")
    client.stop_training_job(TrainingJobName=args.name)
    print(f"stop requested for {args.name}")
    if args.wait:
        job = _wait(client, args.name)
        print(f"{args.name}: {job['TrainingJobStatus']} / {job['SecondaryStatus']}")
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    sagemaker, logs = _client(args, "sagemaker"), _client(args, "logs")
    tokens: dict[str, str | None] = {}
    while True:
        # Read the status before the logs: once it is terminal, one more drain gets every line.
        done = sagemaker.describe_training_job(TrainingJobName=args.name)["TrainingJobStatus"] in TERMINAL
        try:
            streams = logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=f"{args.name}/")["logStreams"]
        except logs.exceptions.ResourceNotFoundException:
            streams = []
        for stream in streams:
            name = stream["logStreamName"]
            while True:
                kwargs: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamName": name, "startFromHead": True}
                if tokens.get(name):
                    kwargs["nextToken"] = tokens[name]
                page = logs.get_log_events(**kwargs)
                tokens[name] = page["nextForwardToken"]
                for event in page["events"]:
                    sys.stdout.write(event["message"].rstrip("\n") + "\n")
                if not page["events"]:
                    break
            sys.stdout.flush()
        if not args.follow or done:
            return 0
        time.sleep(0.5)


def _safe(fn: Any) -> Any:
    """Client errors are the user's answer, not a crash: print the AWS code and message."""

    def run(args: argparse.Namespace) -> int:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            result: int = fn(args)
            return result
        except ClientError as e:
            err = e.response.get("Error", {})
            print(f"murphy: {err.get('Code', 'Error')}: {err.get('Message', e)}", file=sys.stderr)
        except BotoCoreError as e:
            print(f"murphy: cannot reach the server: {e}", file=sys.stderr)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
        return 1

    return run


def add_parser(sub: Any) -> None:
    jobs = sub.add_parser("jobs", help="list, describe, stop training jobs and read their logs")
    jobs.add_argument("--endpoint", help="murphy server URL (default $MURPHY_ENDPOINT or http://127.0.0.1:8080)")
    jsub = jobs.add_subparsers(dest="jobs_command", required=True)
    p = jsub.add_parser("list", help="training jobs, newest first")
    p.add_argument("--status", choices=["InProgress", "Completed", "Failed", "Stopping", "Stopped"])
    p.add_argument("--name-contains")
    p.add_argument("--max", type=int, default=100)
    p.set_defaults(func=_safe(cmd_list))
    p = jsub.add_parser("describe", help="one job: status, transitions, rule statuses")
    p.add_argument("name")
    p.add_argument("--json", action="store_true", help="print DescribeTrainingJob's JSON")
    p.add_argument("--wait", action="store_true", help="wait (with a spinner) until the job ends")
    p.set_defaults(func=_safe(cmd_describe))
    p = jsub.add_parser("stop", help="stop a job (SIGTERM, then SIGKILL after the grace period)")
    p.add_argument("name")
    p.add_argument("--wait", action="store_true")
    p.set_defaults(func=_safe(cmd_stop))
    p = jsub.add_parser("logs", help="the training container's log")
    p.add_argument("name")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing until the job ends")
    p.set_defaults(func=_safe(cmd_logs))
