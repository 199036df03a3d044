"""A webhook receiver process for the events tests and benchmark (stdlib only).

    python webhook_receiver.py --port P --out deliveries.jsonl [--mode-file mode.txt]

Every POST is recorded as one JSON line: ``received_at`` (time.time()), ``status`` (what it
answered), ``headers`` (the X-Murphy-* ones) and ``body`` (the raw body, text). The mode file,
re-read on every request, says how to answer: ``ok`` (204, the default), ``fail`` (500) or
``hang`` (sleep 30 s, then 204: a receiver slower than any sane timeout). "Down" is this process
not running. Prints ``ready <port>`` once listening.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def make_handler(out: Any, lock: threading.Lock, mode_file: Path | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            received = time.time()
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            mode = "ok"
            if mode_file is not None and mode_file.exists():
                mode = mode_file.read_text().strip() or "ok"
            if mode == "hang":
                time.sleep(30)
            status = 500 if mode == "fail" else 204
            record = {"received_at": received, "status": status, "path": self.path,
                      "headers": {k.lower(): v for k, v in self.headers.items() if k.lower().startswith("x-murphy-")
                                  or k.lower() == "content-type"},
                      "body": body.decode("utf-8", errors="replace")}
            with lock:
                out.write(json.dumps(record) + "\n")
                out.flush()
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mode-file", type=Path)
    args = parser.parse_args()
    with open(args.out, "a") as out:
        server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(out, threading.Lock(), args.mode_file))
        server.daemon_threads = True
        print(f"ready {server.server_address[1]}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever(poll_interval=0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
