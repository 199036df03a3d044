"""CloudWatch Logs shapes (the subset SageMaker clients use): camelCase, epoch-millisecond longs."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from murphy.api.shapes.common import AwsModel, enum, s

LogGroupName = Annotated[str, s(1, 512, r"[\.\-_/#A-Za-z0-9]+")]
LogGroupIdentifier = Annotated[str, s(1, 2048, r"[\w#+=/:,.@-]*")]
LogStreamName = Annotated[str, s(1, 512, r"[^:*]*")]
LogsNextToken = Annotated[str, s(1)]
Millis = Annotated[int, Field(ge=0)]


class LogsModel(AwsModel):
    aws_service: ClassVar[str] = "logs"


class DescribeLogStreamsRequest(LogsModel):
    aws_shape = "DescribeLogStreamsRequest"
    logGroupName: LogGroupName | None = None
    logGroupIdentifier: LogGroupIdentifier | None = None
    logStreamNamePrefix: LogStreamName | None = None
    orderBy: Annotated[str, enum("LogStreamName", "LastEventTime")] | None = None
    descending: bool | None = None
    nextToken: LogsNextToken | None = None
    limit: Annotated[int, Field(ge=1, le=50)] | None = None


class LogStream(LogsModel):
    aws_shape = "LogStream"
    logStreamName: LogStreamName
    creationTime: Millis
    firstEventTimestamp: Millis | None = None
    lastEventTimestamp: Millis | None = None
    lastIngestionTime: Millis | None = None
    arn: str
    storedBytes: Millis


class DescribeLogStreamsResponse(LogsModel):
    aws_shape = "DescribeLogStreamsResponse"
    logStreams: list[LogStream]
    nextToken: LogsNextToken | None = None


class GetLogEventsRequest(LogsModel):
    aws_shape = "GetLogEventsRequest"
    logGroupName: LogGroupName | None = None
    logGroupIdentifier: LogGroupIdentifier | None = None
    logStreamName: LogStreamName
    startTime: Millis | None = None
    endTime: Millis | None = None
    nextToken: LogsNextToken | None = None
    limit: Annotated[int, Field(ge=1, le=10000)] | None = None
    startFromHead: bool | None = None
    unmask: bool | None = None


class OutputLogEvent(LogsModel):
    aws_shape = "OutputLogEvent"
    timestamp: Millis
    message: Annotated[str, s(1)]
    ingestionTime: Millis


class GetLogEventsResponse(LogsModel):
    aws_shape = "GetLogEventsResponse"
    events: list[OutputLogEvent]
    nextForwardToken: LogsNextToken
    nextBackwardToken: LogsNextToken
