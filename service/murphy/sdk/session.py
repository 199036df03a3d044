"""Which murphy server the SDK talks to, and the boto3 clients for it.

The endpoint is, in order: the ``endpoint`` argument, ``$MURPHY_ENDPOINT``, or the embedded
in-process service (:mod:`murphy.sdk.embedded`), started on first use. Requests go through the
stock boto3 ``sagemaker`` and ``logs`` clients, so the SDK sees exactly what any SageMaker
client sees. Objects (source tarballs, custom rule files) are written with
:func:`murphy.storage.open_store`, so ``s3://`` goes wherever ``MURPHY_S3_LOCAL_ROOT`` /
``MURPHY_S3_ENDPOINT_URL`` / boto3's S3 configuration say, like the service's own containers.
"""

from __future__ import annotations

import os
from typing import Any

ENDPOINT_ENV = "MURPHY_ENDPOINT"
DEFAULT_BUCKET_ENV = "MURPHY_DEFAULT_BUCKET"
DEFAULT_REGION = "us-east-1"
#: The account murphy puts into ARNs it makes up (a bare role name becomes a role ARN in it).
DEFAULT_ACCOUNT = "123456789012"


def role_arn(role: str | None) -> str:
    """An IAM role ARN: ``role`` as is when it is one; a bare name in the default account (the
    SageMaker SDK would call IAM GetRole, which murphy does not serve); a placeholder when None."""
    if role and role.startswith("arn:"):
        return role
    return f"arn:aws:iam::{DEFAULT_ACCOUNT}:role/{role or 'murphy'}"


class Session:
    """A connection to one murphy server (or the embedded one). Makes no call until used."""

    def __init__(self, endpoint: str | None = None, region: str | None = None,
                 default_bucket: str | None = None) -> None:
        self._endpoint = endpoint
        self._region = region
        self._default_bucket = default_bucket
        self._clients: dict[str, Any] = {}
        self._embedded: bool | None = None

    @property
    def embedded(self) -> bool:
        """True when no server was named, so this process runs its own."""
        if self._embedded is None:
            self._embedded = not (self._endpoint or os.environ.get(ENDPOINT_ENV))
        return self._embedded

    @property
    def endpoint(self) -> str:
        if self._endpoint is None:
            self._endpoint = os.environ.get(ENDPOINT_ENV) or None
            if self._endpoint is None:
                self._embedded = True
                from murphy.sdk import embedded

                self._endpoint = embedded.ensure_started().endpoint
        return self._endpoint

    @property
    def boto_region_name(self) -> str:
        if self._region is None:
            import boto3

            self._region = boto3.session.Session().region_name or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
        return self._region

    def default_bucket(self) -> str:
        """``default_bucket`` argument, ``$MURPHY_DEFAULT_BUCKET``, or ``murphy-default`` for the
        embedded service; a real server has no way to pick one for you."""
        if self._default_bucket:
            return self._default_bucket
        bucket = os.environ.get(DEFAULT_BUCKET_ENV)
        if bucket:
            return bucket
        if self.embedded:
            from murphy.sdk.embedded import DEFAULT_BUCKET

            return DEFAULT_BUCKET
        raise ValueError(
            f"no output location: pass output_path='s3://<bucket>/...' to the estimator, or give a default bucket "
            f"(Session(default_bucket=...) or ${DEFAULT_BUCKET_ENV}); murphy at {self._endpoint or os.environ.get(ENDPOINT_ENV)} "
            "cannot create one for you"
        )

    def client(self, service: str) -> Any:
        """A boto3 client for ``service`` (``sagemaker``, ``logs``) at this session's endpoint."""
        if service not in self._clients:
            import boto3

            session: Any = boto3.session.Session()
            kwargs: dict[str, Any] = {}
            if session.get_credentials() is None:  # botocore will not send unsigned; murphy checks no signature
                kwargs = {"aws_access_key_id": "murphy", "aws_secret_access_key": "murphy"}
            self._clients[service] = session.client(
                service, endpoint_url=self.endpoint, region_name=self.boto_region_name, **kwargs
            )
        return self._clients[service]

    @property
    def sagemaker_client(self) -> Any:
        return self.client("sagemaker")

    @property
    def logs_client(self) -> Any:
        return self.client("logs")

    def upload_bytes(self, data: bytes, s3_uri: str) -> str:
        """Put ``data`` at ``s3_uri`` (``s3://bucket/key``) and return the URI."""
        from murphy.storage import open_store

        _ = self.endpoint  # an embedded service decides where s3:// lives: start it first
        parent, _, name = s3_uri.rpartition("/")
        if not parent.startswith("s3://") or not name:
            raise ValueError(f"not an s3://bucket/key URI: {s3_uri!r}")
        open_store(parent).put(name, data)
        return s3_uri
