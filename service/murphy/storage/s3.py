"""S3 store over boto3: ranged GETs, ListObjectsV2 with StartAfter, any endpoint URL.

boto3 is imported lazily so that a training image without it can still write to local disk.
Native botocore errors are mapped to murphy's in :func:`_mapped` and nowhere else.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from murphy.exceptions import ObjectNotFound, StorageError
from murphy.storage.base import ObjectStore, join_key

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound", "NoSuchBucket"}


@contextmanager
def _mapped(key: str) -> Iterator[None]:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as e:
        code = str(e.response.get("Error", {}).get("Code", ""))
        if code in _NOT_FOUND_CODES:
            raise ObjectNotFound(key) from None
        raise StorageError(f"S3 error on {key}: {code}: {e}") from e
    except BotoCoreError as e:
        raise StorageError(f"S3 error on {key}: {e}") from e


def make_s3_client(endpoint_url: str | None = None, region: str | None = None) -> S3Client:
    """A boto3 S3 client. The endpoint comes from the argument, ``MURPHY_S3_ENDPOINT_URL``,
    ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` (boto3 reads the last two itself)."""
    import boto3
    from botocore.config import Config

    endpoint = endpoint_url or os.environ.get("MURPHY_S3_ENDPOINT_URL") or None
    config = Config(
        retries={"max_attempts": 5, "mode": "standard"},
        # Path-style addressing works with every self-hosted endpoint (SeaweedFS, moto, MinIO).
        s3={"addressing_style": "path"},
    )
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        config=config,
    )


class S3ObjectStore:
    """An :class:`ObjectStore` over ``s3://bucket/prefix``."""

    def __init__(self, bucket: str, prefix: str = "", *, client: Any = None, endpoint_url: str | None = None) -> None:
        if not bucket:
            raise StorageError("an S3 URI needs a bucket: s3://bucket/prefix")
        self._bucket = bucket
        self._prefix = prefix.strip("/")
        self._client: S3Client = client if client is not None else make_s3_client(endpoint_url)

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def client(self) -> S3Client:
        return self._client

    @property
    def uri(self) -> str:
        return f"s3://{self._bucket}/{self._prefix}" if self._prefix else f"s3://{self._bucket}"

    def _full(self, key: str) -> str:
        return join_key(self._prefix, key)

    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": self._full(key)}
        if length is not None:
            if length <= 0:
                return b""
            kwargs["Range"] = f"bytes={start}-{start + length - 1}"
        elif start:
            kwargs["Range"] = f"bytes={start}-"
        from botocore.exceptions import ClientError

        try:
            with _mapped(key):
                body = self._client.get_object(**kwargs)["Body"]
                try:
                    return body.read()
                finally:
                    body.close()
        except StorageError as e:
            # A range starting at or past the end is "416 InvalidRange"; the contract says an
            # over-long range returns what exists, so that is an empty read.
            cause = e.__cause__
            if isinstance(cause, ClientError) and cause.response.get("Error", {}).get("Code") == "InvalidRange":
                return b""
            raise

    def put(self, key: str, data: bytes) -> None:
        # A single PutObject is atomic on S3: readers never see a partial object.
        with _mapped(key):
            self._client.put_object(Bucket=self._bucket, Key=self._full(key), Body=data)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[str]:
        base = self._prefix + "/" if self._prefix else ""
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": base + prefix}
        if start_after is not None:
            kwargs["StartAfter"] = base + start_after
        with _mapped(prefix):
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(**kwargs):
                for obj in page.get("Contents", []):
                    yield obj["Key"][len(base):]

    def exists(self, key: str) -> bool:
        try:
            with _mapped(key):
                self._client.head_object(Bucket=self._bucket, Key=self._full(key))
            return True
        except ObjectNotFound:
            return False

    def delete(self, key: str) -> None:
        with _mapped(key):
            self._client.delete_object(Bucket=self._bucket, Key=self._full(key))

    def child(self, prefix: str) -> ObjectStore:
        return S3ObjectStore(self._bucket, join_key(self._prefix, prefix), client=self._client)

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (smdebug's writer does the same)."""
        from botocore.exceptions import ClientError

        try:
            self._client.head_bucket(Bucket=self._bucket)
        except ClientError:
            with _mapped(self._bucket):
                self._client.create_bucket(Bucket=self._bucket)
