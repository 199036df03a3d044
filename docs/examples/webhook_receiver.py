"""A webhook receiver for murphy events that verifies every delivery (standard library only).

    MURPHY_WEBHOOK_SECRET=<the subscription's secret> python webhook_receiver.py --port 9000
    murphy events subscribe --name pager --webhook http://127.0.0.1:9000/ \\
        --secret <the same secret> --pattern '{"detail":{"MurphyChanges":{"To":["IssuesFound"]}}}'

murphy signs the raw body: ``X-Murphy-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>``.
Verify the bytes you received, before parsing them, with a constant-time comparison. Delivery
is at least once: a retry carries the same ``X-Murphy-Event-Id``, so remember the ids you handled.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def verify(secret: str, body: bytes, signature: str | None) -> bool:
    """True when ``signature`` (the X-Murphy-Signature-256 header) is ``body``'s HMAC under ``secret``."""
    if not signature or not signature.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), signature.encode())


def handle(event: dict[str, Any]) -> None:
    """Your code: here, print rule findings."""
    for change in event["detail"].get("MurphyChanges", []):
        if change.get("To") == "IssuesFound":
            print(f"{event['detail']['TrainingJobName']}: {change['RuleConfigurationName']} found an issue "
                  f"at step {change.get('Step')} ({change.get('Tensor')})", flush=True)


class Receiver(BaseHTTPRequestHandler):
    secret = ""
    seen: set[str] = set()  # event ids already handled (keep these in a database in production)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not verify(self.secret, body, self.headers.get("X-Murphy-Signature-256")):
            self.send_response(401)  # not from murphy, or altered: murphy retries, then dead-letters it
        else:
            event = json.loads(body)
            if event["id"] not in self.seen:
                handle(event)
                self.seen.add(event["id"])
            self.send_response(204)  # any 2xx: delivered
        self.send_header("Content-Length", "0")
        self.end_headers()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=9000)
    args = parser.parse_args()
    Receiver.secret = os.environ["MURPHY_WEBHOOK_SECRET"]
    ThreadingHTTPServer(("127.0.0.1", args.port), Receiver).serve_forever()


if __name__ == "__main__":
    main()
