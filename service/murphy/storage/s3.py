"""S3 store over boto3: ranged GETs, ListObjectsV2 with StartAfter, any endpoint URL.

boto3 is imported lazily so that a training image without it can still write to local disk.
Native botocore errors are mapped to murphy's in :func:`_mapped` and nowhere else. GETs take the
cheaper signed-HTTP path of :mod:`murphy.storage.s3fast` where it applies, and boto3 otherwise.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Generator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from murphy.exceptions import ObjectNotFound, StorageError
from murphy.storage.base import ObjectStore, join_key
from murphy.storage.s3fast import FallBack, FastS3

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

log = logging.getLogger(__name__)

_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound", "NoSuchBucket"}
_BOTO3_THREADS = 16
_BOTO3_BATCH = 128


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
    ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``.

    Each call uses a new boto3 session, so credentials are resolved from the environment *now*:
    ``boto3.client`` would reuse the default session's, cached from its first use.
    """
    return _Connection.open(endpoint_url, region, fast_get=False).client()


def _endpoint_from_env(endpoint_url: str | None) -> str | None:
    """The endpoint boto3 would take from the environment, resolved here so that boto3 and the
    fast path are given the same one."""
    if endpoint_url or os.environ.get("MURPHY_S3_ENDPOINT_URL"):
        return endpoint_url or os.environ["MURPHY_S3_ENDPOINT_URL"]
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return None
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def default_region() -> str:
    """The region the service's S3 client uses when none is given."""
    return os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def service_endpoint(endpoint_url: str | None) -> tuple[str, str | None]:
    """The S3 endpoint the service's store talks to, and the region to sign for there (None: the
    client's own). Without a configured one, AWS's regional endpoint of :func:`default_region` as
    botocore's endpoint data names it (its partition's DNS suffix: ``amazonaws.com.cn`` for
    ``cn-*``...): murphy's S3 gateway forwards there (docs/security.md)."""
    configured = _endpoint_from_env(endpoint_url)
    if configured:
        return configured, None
    import botocore.regions
    import botocore.session

    region = default_region()
    resolver = botocore.regions.EndpointResolver(botocore.session.Session().get_data("endpoints"))
    found = resolver.construct_endpoint("s3", region)
    if not found:  # a region botocore's data does not know yet: its rules fall back to the aws partition
        return f"https://s3.{region}.amazonaws.com", region
    scope = found.get("credentialScope") or {}
    return f"https://{found['hostname']}", str(scope.get("region") or region)


class _Connection:
    """The boto3 client and the fast path of a store and its children, each made on first use.

    A store opened from a URI gets a new botocore session whose credentials are resolved at once
    (store-open time) and kept; the client (~0.1-0.2 s to build: it loads the S3 service model)
    is only made when boto3 is needed. With a known endpoint the fast path needs no client.
    """

    def __init__(self, client: Any = None, session: Any = None, endpoint: str | None = None, region: str = "us-east-1", fast_get: bool = True) -> None:
        self._client = client
        self._session = session
        self._endpoint = endpoint
        self._region = region
        self._credentials = session.get_credentials() if session is not None else None
        self._fast_get = fast_get
        self._fast: FastS3 | None = None
        self._fast_resolved = not fast_get
        self._lock = threading.RLock()  # fast() may build the client under it

    @classmethod
    def open(cls, endpoint_url: str | None, region: str | None, *, fast_get: bool = True) -> _Connection:
        import botocore.session

        region = region or default_region()
        return cls(None, botocore.session.Session(), _endpoint_from_env(endpoint_url), region, fast_get)

    def client(self) -> S3Client:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._make_client()
        client: S3Client = self._client
        return client

    def _make_client(self) -> S3Client:
        import boto3.session
        from botocore.config import Config

        config = Config(
            retries={"max_attempts": 5, "mode": "standard"},
            # Path-style addressing works with every self-hosted endpoint (SeaweedFS, moto, MinIO).
            s3={"addressing_style": "path"},
        )
        session = boto3.session.Session(botocore_session=self._session)
        return session.client("s3", endpoint_url=self._endpoint, region_name=self._region, config=config)

    def fast(self) -> FastS3 | None:
        """The fast path, or None where it does not apply (or was disabled)."""
        if not self._fast_resolved:
            with self._lock:
                if not self._fast_resolved:
                    self._fast = self._make_fast()
                    self._fast_resolved = True
        fast = self._fast
        return None if fast is None or fast.disabled else fast

    def _make_fast(self) -> FastS3 | None:
        if self._session is not None and self._endpoint:
            return FastS3.from_settings(self._endpoint, self._region, self._credentials, self._session.get_config_variable("ca_bundle"))
        return FastS3.from_client(self.client(), self._credentials)


class S3ObjectStore:
    """An :class:`ObjectStore` over ``s3://bucket/prefix``."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        client: Any = None,
        endpoint_url: str | None = None,
        fast_get: bool = True,
        _conn: _Connection | None = None,
    ) -> None:
        if not bucket:
            raise StorageError("an S3 URI needs a bucket: s3://bucket/prefix")
        self._bucket = bucket
        self._prefix = prefix.strip("/")
        # fast_get=False keeps every request on boto3 (tests compare the two paths).
        if _conn is None:
            _conn = _Connection(client, fast_get=fast_get) if client is not None else _Connection.open(endpoint_url, None, fast_get=fast_get)
        self._conn = _conn

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def client(self) -> S3Client:
        return self._conn.client()

    @property
    def uri(self) -> str:
        return f"s3://{self._bucket}/{self._prefix}" if self._prefix else f"s3://{self._bucket}"

    def _full(self, key: str) -> str:
        return join_key(self._prefix, key)

    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        range_header = None
        if length is not None:
            if length <= 0:
                return b""
            range_header = f"bytes={start}-{start + length - 1}"
        elif start:
            range_header = f"bytes={start}-"
        getter = self._conn.fast()
        if getter is not None:
            try:
                status, data = getter.get(self._bucket, self._full(key), range_header, key)
            except FallBack as e:
                return self._get_boto3(key, range_header, getter, str(e))
            if status == 416:
                return b""  # the range starts at or past the end: an empty read (see below)
            if status == 200 and range_header:
                # A server that ignores Range sends the whole object; keep to the contract.
                return data[start:] if length is None else data[start : start + length]
            return data
        return self._get_boto3(key, range_header)

    def _get_boto3(self, key: str, range_header: str | None, getter: FastS3 | None = None, why: str = "") -> bytes:
        """The boto3 GET; after a fast-path answer it could not use, it decides for both."""
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": self._full(key)}
        if range_header:
            kwargs["Range"] = range_header
        from botocore.exceptions import ClientError

        try:
            with _mapped(key):
                body = self.client.get_object(**kwargs)["Body"]
                try:
                    data = body.read()
                finally:
                    body.close()
        except StorageError as e:
            # A range starting at or past the end is "416 InvalidRange"; the contract says an
            # over-long range returns what exists, so that is an empty read.
            cause = e.__cause__
            if isinstance(cause, ClientError) and cause.response.get("Error", {}).get("Code") == "InvalidRange":
                return b""
            raise
        if getter is not None and not getter.disabled:
            # boto3 succeeded where the fast path got an answer it could not use (a redirect to
            # another region, a signature it rejected...): keep this store on boto3.
            log.warning("S3 fast GET path disabled for %s (%s); using boto3", self.uri, why)
            getter.disabled = True
        return data

    def get_many(self, keys: Sequence[str]) -> Generator[tuple[str, bytes | None], None, None]:
        """``(key, whole object)`` for each key, in order; None for a key that does not exist.

        Other errors raise as :meth:`get` would. On the fast path the GETs go out together over
        up to 16 kept-alive sockets (:mod:`murphy.storage.s3batch`); a key that gets no plain
        answer there (200 or 404) is repeated through :meth:`get`. Otherwise up to 16 boto3 GETs
        run at a time. About 128 objects are held at most.
        """
        fast = self._conn.fast()
        done = 0
        if fast is not None:
            answers = fast.get_many(self._bucket, [self._full(k) for k in keys])
            try:
                for key, (status, body) in zip(keys, answers, strict=True):
                    if status == 200:
                        yield key, body
                    elif status == 404:
                        yield key, None
                    else:
                        yield key, self._get_or_none(key)
                    done += 1
                    if fast.disabled:  # that get() went to boto3 and kept the store there
                        break
            finally:
                answers.close()
        rest = keys[done:]
        if not rest:
            return
        with ThreadPoolExecutor(min(_BOTO3_THREADS, len(rest))) as pool:
            for i in range(0, len(rest), _BOTO3_BATCH):
                chunk = rest[i : i + _BOTO3_BATCH]
                yield from zip(chunk, pool.map(self._get_or_none, chunk), strict=True)

    def _get_or_none(self, key: str) -> bytes | None:
        try:
            return self.get(key)
        except ObjectNotFound:
            return None

    def put(self, key: str, data: bytes) -> None:
        # A single PutObject is atomic on S3: readers never see a partial object.
        with _mapped(key):
            self.client.put_object(Bucket=self._bucket, Key=self._full(key), Body=data)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[str]:
        base = self._prefix + "/" if self._prefix else ""
        after = base + start_after if start_after is not None else None
        fast = self._conn.fast()
        if fast is not None:
            token: str | None = None
            try:
                while True:
                    keys, token = fast.list_page(self._bucket, base + prefix, after, token)
                    for full in keys:
                        after = full  # where boto3 resumes if a later page falls back
                        yield full[len(base):]
                    if token is None:
                        return
            except FallBack as e:
                log.debug("S3 fast listing fell back to boto3: %s", e)
        yield from self._list_boto3(base, prefix, after)

    def _list_boto3(self, base: str, prefix: str, after: str | None) -> Iterator[str]:
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": base + prefix}
        if after is not None:
            kwargs["StartAfter"] = after
        with _mapped(prefix):
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(**kwargs):
                for obj in page.get("Contents", []):
                    yield obj["Key"][len(base):]

    def exists(self, key: str) -> bool:
        fast = self._conn.fast()
        if fast is not None:
            try:
                return fast.exists(self._bucket, self._full(key))
            except FallBack:
                pass
        try:
            with _mapped(key):
                self.client.head_object(Bucket=self._bucket, Key=self._full(key))
            return True
        except ObjectNotFound:
            return False

    def delete(self, key: str) -> None:
        with _mapped(key):
            self.client.delete_object(Bucket=self._bucket, Key=self._full(key))

    def child(self, prefix: str) -> ObjectStore:
        return S3ObjectStore(self._bucket, join_key(self._prefix, prefix), _conn=self._conn)

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (smdebug's writer does the same)."""
        from botocore.exceptions import ClientError

        try:
            self.client.head_bucket(Bucket=self._bucket)
        except ClientError:
            with _mapped(self._bucket):
                self.client.create_bucket(Bucket=self._bucket)
