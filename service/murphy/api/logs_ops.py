"""CloudWatch Logs operations (DescribeLogStreams, GetLogEvents) over JobService's log streams.

GetLogEvents tokens are ``f/<cursor:020d>`` (read on from there) and ``b/<cursor:020d>`` (read the
events before there), with the runtime's own cursors (``LogPage.next_cursor``). A page with no
events returns the forward token it was given, so the SDK, which reads until an empty page, stops.
Without a token and without ``startFromHead`` the newest ``limit`` events are returned, as AWS does.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from murphy.api import pagination
from murphy.api.caller import Caller
from murphy.api.shapes.logs import DescribeLogStreamsRequest, GetLogEventsRequest
from murphy.api.validation import parse
from murphy.exceptions import InvalidParameterException
from murphy.jobs.service import JobService
from murphy.runtimes.base import LogEvent, LogPage

DEFAULT_STREAMS_PAGE = 50
DEFAULT_EVENTS = 10_000
_READ_CHUNK = 10_000
_TOKEN = re.compile(r"([fb])/(\d{1,20})")


def _group(name: str | None, identifier: str | None) -> str:
    if name and identifier:
        raise InvalidParameterException("logGroupName and logGroupIdentifier are mutually exclusive: give one.")
    if identifier:
        # An ARN (arn:aws:logs:<region>:<account>:log-group:<name>[:*]) or a bare name.
        _, sep, rest = identifier.partition(":log-group:")
        return rest.removesuffix(":*") if sep else identifier
    if not name:
        raise InvalidParameterException("Either logGroupName or logGroupIdentifier is required.")
    return name


def describe_log_streams(service: JobService, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
    req = parse(DescribeLogStreamsRequest, body, error=InvalidParameterException)
    group = _group(req.logGroupName, req.logGroupIdentifier)
    order = req.orderBy or "LogStreamName"
    if order == "LastEventTime" and req.logStreamNamePrefix:
        raise InvalidParameterException("Cannot order by LastEventTime with a logStreamNamePrefix.")
    streams = service.log_streams(group, req.logStreamNamePrefix or "", account=caller.account)
    if order == "LastEventTime":
        streams = sorted(streams, key=lambda s: (s.last_event_ms or 0, s.name))
    if req.descending:
        streams = streams[::-1]
    scope = pagination.scope_of("DescribeLogStreams", group, req.logStreamNamePrefix, order, bool(req.descending))
    offset = pagination.decode(req.nextToken, scope, error=InvalidParameterException) if req.nextToken else 0
    limit = req.limit or DEFAULT_STREAMS_PAGE
    arn = f"arn:aws:logs:{caller.region}:{caller.account}:log-group:{group}:log-stream:"
    out: list[dict[str, Any]] = []
    for s in streams[offset:offset + limit]:
        item: dict[str, Any] = {"logStreamName": s.name, "creationTime": s.creation_ms}
        if s.first_event_ms is not None:
            item["firstEventTimestamp"] = s.first_event_ms
        if s.last_event_ms is not None:
            item["lastEventTimestamp"] = s.last_event_ms
            item["lastIngestionTime"] = s.last_event_ms
        item["arn"] = arn + s.name
        item["storedBytes"] = s.stored_bytes
        out.append(item)
    resp: dict[str, Any] = {"logStreams": out}
    if offset + limit < len(streams):
        resp["nextToken"] = pagination.encode(offset + limit, scope)
    return resp


class _Reader:
    """Reads one stream through JobService, applying startTime (inclusive) / endTime (exclusive).

    Cursors are the runtime's own (an event index for FakeRuntime, a byte offset for
    ProcessRuntime), so the position after exactly ``k`` events is found by reading ``k``
    events, never by arithmetic.
    """

    def __init__(self, service: JobService, group: str, stream: str, start: int | None, end: int | None,
                 account: str | None = None) -> None:
        self.service = service
        self.account = account
        self.group = group
        self.stream = stream
        self.start = start
        self.end = end

    def _read(self, cursor: int, limit: int) -> LogPage:
        return self.service.get_log_events(self.group, self.stream, cursor, limit, account=self.account)

    def advance(self, cursor: int, k: int) -> int:
        """The cursor after ``k`` more events (or at the end of the stream)."""
        while k > 0:
            page = self._read(cursor, min(k, _READ_CHUNK))
            if not page.events:
                break
            k -= len(page.events)
            cursor = page.next_cursor
        return cursor

    def _wanted(self, event: LogEvent) -> bool:
        return (self.start is None or event.timestamp_ms >= self.start) and (
            self.end is None or event.timestamp_ms < self.end
        )

    def forward(self, cursor: int, limit: int) -> tuple[list[LogEvent], int | None, int]:
        """Up to ``limit`` matching events from ``cursor`` on, the cursor where the first of them
        starts, and the cursor after the last event consumed."""
        out: list[LogEvent] = []
        first: int | None = None
        while len(out) < limit:
            # Never ask for more than still fits, so a page never has to be split after the limit.
            page = self._read(cursor, min(_READ_CHUNK, limit - len(out)))
            if not page.events:
                break
            for i, event in enumerate(page.events):
                if self.end is not None and event.timestamp_ms >= self.end:
                    # Logs are in time order: nothing later matches. Stop before this event.
                    return out, first, self.advance(cursor, i)
                if self.start is None or event.timestamp_ms >= self.start:
                    if first is None:
                        first = self.advance(cursor, i)
                    out.append(event)
            cursor = page.next_cursor
        return out, first, cursor

    def _cut(self, cursor: int, page: LogPage, until: int) -> tuple[list[LogEvent], int]:
        """The events of ``page`` (read from ``cursor``) that lie before ``until``."""
        lo, hi = 0, len(page.events)  # invariant: advance(cursor, lo) <= until
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.advance(cursor, mid) <= until:
                lo = mid
            else:
                hi = mid - 1
        return page.events[:lo], self.advance(cursor, lo)

    def tail(self, limit: int, until: int | None = None) -> tuple[list[LogEvent], int, int]:
        """The last ``limit`` events before ``until`` (the end when None), filtered; the cursor
        where they start and the cursor where the scan ended."""
        chunks: deque[tuple[int, list[LogEvent]]] = deque()
        total = 0
        cursor = 0
        while until is None or cursor < until:
            page = self._read(cursor, _READ_CHUNK)
            if not page.events:
                break
            events, after = page.events, page.next_cursor
            if until is not None and after > until:
                events, after = self._cut(cursor, page, until)
            chunks.append((cursor, events))
            total += len(events)
            while total - len(chunks[0][1]) >= limit:
                total -= len(chunks.popleft()[1])
            if after == cursor:
                break
            cursor = after
        if not chunks:
            return [], cursor, cursor
        drop = max(0, total - limit)
        start = self.advance(chunks[0][0], drop) if drop else chunks[0][0]
        flat = [e for _, events in chunks for e in events][drop:]
        return [e for e in flat if self._wanted(e)], start, cursor


def _page(events: list[LogEvent], forward: str, backward: str) -> dict[str, Any]:
    return {
        "events": [{"timestamp": e.timestamp_ms, "message": e.message, "ingestionTime": e.ingestion_ms} for e in events],
        "nextForwardToken": forward,
        "nextBackwardToken": backward,
    }


def get_log_events(service: JobService, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
    req = parse(GetLogEventsRequest, body, error=InvalidParameterException)
    group = _group(req.logGroupName, req.logGroupIdentifier)
    limit = req.limit or DEFAULT_EVENTS
    reader = _Reader(service, group, req.logStreamName, req.startTime, req.endTime, caller.account)
    if req.nextToken is None:
        if req.startFromHead:
            events, first, after = reader.forward(0, limit)
            return _page(events, f"f/{after:020d}", f"b/{(first if first is not None else after):020d}")
        events, start, end = reader.tail(limit)
        return _page(events, f"f/{end:020d}", f"b/{start:020d}")
    m = _TOKEN.fullmatch(req.nextToken)
    if m is None:
        raise InvalidParameterException("The specified nextToken is invalid.")
    cursor = int(m.group(2))
    if m.group(1) == "f":
        events, first, after = reader.forward(cursor, limit)
        if not events:
            return _page([], req.nextToken, f"b/{cursor:020d}")
        return _page(events, f"f/{after:020d}", f"b/{(first if first is not None else cursor):020d}")
    events, start, _ = reader.tail(limit, until=cursor)
    if not events:
        return _page([], f"f/{cursor:020d}", req.nextToken)
    return _page(events, f"f/{cursor:020d}", f"b/{start:020d}")
