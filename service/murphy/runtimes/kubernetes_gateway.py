"""Where the Kubernetes runtime's pods reach murphy's S3 gateway, and serving it there.

Pods never reach S3 itself (docs/security.md): their endpoint is the gateway in murphy's process
(:class:`murphy.auth.s3gateway.S3Gateway`, the same one the process and Docker runtimes use),
which authorizes each request against the pod's own key and re-signs it with the service's
credentials. Inside a cluster murphy serves it on ``0.0.0.0:8081`` and pods reach it through
murphy's own Service (``http://murphy.<murphy's namespace>.svc:8081``, ``infra/kubernetes``);
outside one (murphy's fake cluster, whose pods are processes of this machine) on loopback, on a
port kept across restarts so re-attached pods keep their endpoint. Either can be set
(``MURPHY_KUBERNETES_S3_GATEWAY_URL``, ``MURPHY_KUBERNETES_S3_GATEWAY_LISTEN``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes import s3_access
from murphy.runtimes.base import JobCredentials
from murphy.runtimes.kubernetes_objects import GATEWAY_PORT

#: The namespace of the pod murphy runs in (its ServiceAccount's mount).
NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
#: murphy's Service in ``infra/kubernetes``.
SERVICE_NAME = "murphy"


def own_namespace(environ: Mapping[str, str], namespace_file: str = NAMESPACE_FILE) -> str | None:
    """murphy's namespace when it runs in a cluster's pod, else None."""
    if not environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    try:
        return Path(namespace_file).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``[::]:8081`` for IPv6) as a pair, or a clear error."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise RuntimeBackendError(f"MURPHY_KUBERNETES_S3_GATEWAY_LISTEN={listen!r} is not host:port (e.g. 0.0.0.0:8081)")
    return host.strip("[]"), int(port)


def serve(credentials: JobCredentials, root_dir: Path, url: str | None, listen: str | None, *,
          environ: Mapping[str, str] | None = None, namespace_file: str = NAMESPACE_FILE) -> str:
    """Start serving the gateway for pods; returns its URL as pods reach it."""
    namespace = own_namespace(os.environ if environ is None else environ, namespace_file)
    if url is None and namespace is not None:
        url = f"http://{SERVICE_NAME}.{namespace}.svc:{GATEWAY_PORT}"
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise RuntimeBackendError(f"MURPHY_KUBERNETES_S3_GATEWAY_URL={url!r}: the gateway is an http:// URL "
                                      "(e.g. http://murphy.murphy.svc:8081)")
        listen = listen or f"0.0.0.0:{parts.port or 80}"
    if listen is None:
        return s3_access.listen_loopback(credentials, root_dir)
    host, port = parse_listen(listen)
    try:
        bound = credentials.listen_tcp(host, port)
    except OSError as e:
        raise RuntimeBackendError(f"cannot serve the S3 gateway for pods on {listen}: {e}") from e
    if url is None:
        if host in ("0.0.0.0", "::"):
            raise RuntimeBackendError(f"the S3 gateway listens on {listen}: set MURPHY_KUBERNETES_S3_GATEWAY_URL "
                                      "(--pods-s3-gateway-url) to the address pods reach it at")
        return bound
    return url
