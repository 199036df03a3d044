"""``murphy events subscribe | list | delete | dead-letters | redrive | tail``: event subscriptions
of a murphy server, over its REST API (``/v1/subscriptions``, ``/v1/events/stream``)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any


class CliError(Exception):
    """A message for the user, printed without a traceback."""


def _endpoint(args: argparse.Namespace) -> str:
    return str(args.endpoint or os.environ.get("MURPHY_ENDPOINT") or "http://127.0.0.1:8080").rstrip("/")


def _call(args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    url = _endpoint(args) + path
    data = json.dumps(body).encode() if body is not None else None
    from murphy.events.signing import sign

    headers = sign(method, url, {"Content-Type": "application/json", "Accept": "application/json"}, data or b"")
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            err = json.loads(raw)
            message = f"{err.get('__type', e.code)}: {err.get('message', '')}"
        except ValueError:
            message = f"HTTP {e.code}: {raw[:300].decode(errors='replace')}"
        raise CliError(message) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise CliError(f"cannot reach the server at {_endpoint(args)}: {reason}") from None
    return json.loads(raw) if raw else None


def _pattern(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as e:
            raise CliError(f"cannot read the pattern file: {e}") from None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise CliError(f"--pattern is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise CliError("--pattern must be a JSON object, e.g. '{\"detail\":{\"TrainingJobStatus\":[\"Failed\"]}}'")
    return value


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False)


def _when(iso: str | None) -> str:
    if not iso:
        return ""
    try:
        return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return iso


def _target(target: dict[str, Any]) -> str:
    if target.get("type") == "webhook":
        return f"webhook {target.get('url', '')}" + (" (signed)" if target.get("secret") else "")
    if target.get("type") == "eventbridge":
        return (f"eventbridge {target.get('endpoint_url') or 'AWS'} bus={target.get('event_bus_name', 'default')} "
                f"region={target.get('region', '')}")
    return json.dumps(target)


def cmd_subscribe(args: argparse.Namespace) -> int:
    target: dict[str, Any]
    if args.webhook:
        target = {"type": "webhook", "url": args.webhook}
        if args.secret:
            target["secret"] = args.secret
    else:
        target = {"type": "eventbridge", "endpoint_url": args.eventbridge_endpoint,
                  "region": args.region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
                  "event_bus_name": args.event_bus_name}
    body: dict[str, Any] = {"name": args.name, "pattern": _pattern(args.pattern) or {"source": ["aws.sagemaker"]},
                            "target": target}
    if args.replay:
        body["start_seq"] = 0
    sub = _call(args, "POST", "/v1/subscriptions", body)
    console = _console()
    console.print(f"subscription [bold]{sub['name']}[/bold] created (id {sub['id']})")
    console.print(f"  target:  {_target(sub['target'])}")
    console.print(f"  pattern: {json.dumps(sub['pattern'])}")
    secret = sub["target"].get("secret")
    if secret:
        # Printed once: the server never shows it again.
        console.print(f"  secret:  {secret}  (shown once; receivers check X-Murphy-Signature-256 with it)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from rich.table import Table

    subs = _call(args, "GET", "/v1/subscriptions")["subscriptions"]
    if args.json:
        print(json.dumps(subs, indent=2))
        return 0
    table = Table(title=f"event subscriptions ({len(subs)})")
    for col in ("Name", "Id", "Target", "Pattern", "Created"):
        table.add_column(col, overflow="fold")
    for s in subs:
        table.add_row(s["name"], s["id"], _target(s["target"]), json.dumps(s["pattern"], separators=(",", ":")),
                      _when(s.get("created_at")))
    _console().print(table)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    _call(args, "DELETE", f"/v1/subscriptions/{urllib.parse.quote(args.name, safe='')}")
    print(f"deleted subscription {args.name}")
    return 0


def _summary(event: dict[str, Any]) -> tuple[str, str]:
    detail = event.get("detail", {})
    job = detail.get("TrainingJobName", ",".join(event.get("resources", [])))
    changes = [f"{c.get('RuleConfigurationName', c.get('Kind'))}: {c.get('From')} -> {c.get('To')}"
               for c in detail.get("MurphyChanges", [])]
    state = f"{detail.get('TrainingJobStatus', '')}/{detail.get('SecondaryStatus', '')}"
    return job, "; ".join(changes) or state


def cmd_dead_letters(args: argparse.Namespace) -> int:
    from rich.table import Table

    path = (f"/v1/subscriptions/{urllib.parse.quote(args.name, safe='')}/dead-letters" if args.name
            else "/v1/dead-letters")
    letters = _call(args, "GET", path)["dead_letters"]
    if args.json:
        print(json.dumps(letters, indent=2))
        return 0
    names = {s["id"]: s["name"] for s in _call(args, "GET", "/v1/subscriptions")["subscriptions"]}
    table = Table(title=f"dead letters ({len(letters)})")
    for col in ("Subscription", "Seq", "Event id", "Job", "Change", "Attempts", "Last error", "Failed"):
        table.add_column(col, overflow="fold")
    for d in letters:
        job, change = _summary(d["event"])
        table.add_row(names.get(d["subscription_id"], d["subscription_id"]), str(d["seq"]), str(d["event_id"]),
                      job, change, str(d["attempts"]), d["last_error"], _when(d.get("failed_at")))
    _console().print(table)
    return 0


def cmd_redrive(args: argparse.Namespace) -> int:
    body = {"seqs": args.seq} if args.seq else {}
    result = _call(args, "POST", f"/v1/subscriptions/{urllib.parse.quote(args.name, safe='')}/redrive", body)
    print(f"re-queued {result['redriven']} event(s) for {args.name}")
    return 0


def cmd_tail(args: argparse.Namespace) -> int:
    from murphy.events.client import subscribe

    pattern = _pattern(args.pattern)
    done = threading.Event()
    count = 0

    def show(event: dict[str, Any]) -> None:
        nonlocal count
        if args.json:
            line = json.dumps(event, separators=(",", ":"))
        else:
            job, change = _summary(event)
            line = f"{event.get('time', '')}  {job}  {change}"
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        count += 1
        if args.count and count >= args.count:
            done.set()

    sub = subscribe(pattern, show, _endpoint(args), last_event_id=args.last_event_id)
    try:
        while not done.wait(0.2):
            if not sub.running:
                raise CliError(str(sub.error or "the event stream stopped"))
    finally:
        sub.close()
    return 0


def _safe(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            result: int = fn(args)
            return result
        except CliError as e:
            print(f"murphy: {e}", file=sys.stderr)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
        return 1

    return run


def add_parser(sub: Any) -> None:
    events = sub.add_parser("events", help="event subscriptions: webhooks, EventBridge, dead letters, live tail")
    events.add_argument("--endpoint", help="murphy server URL (default $MURPHY_ENDPOINT or http://127.0.0.1:8080)")
    events.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the server")
    esub = events.add_subparsers(dest="events_command", required=True)
    p = esub.add_parser("subscribe", help="create a subscription: an event pattern and one target")
    p.add_argument("--name", required=True)
    p.add_argument("--pattern", help="EventBridge event pattern as JSON, or @file.json "
                                     "(default: every murphy event, {\"source\":[\"aws.sagemaker\"]})")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--webhook", metavar="URL", help="POST each event to this http(s) URL")
    target.add_argument("--eventbridge-endpoint", metavar="URL", help="PutEvents to this EventBridge endpoint")
    p.add_argument("--secret", help="webhook signing secret (default: the server makes one and prints it once)")
    p.add_argument("--event-bus-name", default="default", help="EventBridge bus (default 'default')")
    p.add_argument("--region", help="EventBridge region (default $AWS_DEFAULT_REGION or us-east-1)")
    p.add_argument("--replay", action="store_true", help="also deliver every event already stored")
    p.set_defaults(func=_safe(cmd_subscribe))
    p = esub.add_parser("list", help="subscriptions")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_safe(cmd_list))
    p = esub.add_parser("delete", help="delete a subscription")
    p.add_argument("name", help="name or id")
    p.set_defaults(func=_safe(cmd_delete))
    p = esub.add_parser("dead-letters", help="events a subscription gave up on (all subscriptions by default)")
    p.add_argument("name", nargs="?", help="name or id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_safe(cmd_dead_letters))
    p = esub.add_parser("redrive", help="deliver dead letters again")
    p.add_argument("name", help="name or id")
    p.add_argument("--seq", type=int, action="append", help="only this event (repeatable); default: all")
    p.set_defaults(func=_safe(cmd_redrive))
    p = esub.add_parser("tail", help="print events as they happen (the /v1/events/stream)")
    p.add_argument("--pattern", help="only events matching this EventBridge pattern (JSON or @file.json)")
    p.add_argument("--last-event-id", type=int, help="start after this sequence number (0 = from the start)")
    p.add_argument("--count", type=int, help="exit after this many events")
    p.add_argument("--json", action="store_true", help="print each event's JSON")
    p.set_defaults(func=_safe(cmd_tail))
