"""`make up`'s last check: the S3 endpoint answers with the generated keys and serves the bucket
SeaweedFS creates at start-up (``weed mini -bucket``). Runs with the deployment's environment
(``MURPHY_S3_ENDPOINT_URL`` and the ``AWS_*`` keys): in the server's container, or with the
project's venv. Usage: ``python check_s3.py BUCKET``; exit 0 once the bucket is listed."""

from __future__ import annotations

import os
import sys
import time

import boto3
from botocore.config import Config


def main() -> int:
    bucket = sys.argv[1]
    client = boto3.client(
        "s3", endpoint_url=os.environ["MURPHY_S3_ENDPOINT_URL"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    deadline = time.monotonic() + float(os.environ.get("MURPHY_UP_TIMEOUT", "60"))
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            names = [b["Name"] for b in client.list_buckets()["Buckets"]]
            if bucket in names:
                return 0
            last = f"buckets: {names}"
        except Exception as e:  # not ready yet, or the keys are refused: report the last one
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.5)
    print(f"check_s3: bucket {bucket!r} not served: {last}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
