"""Where a runtime's containers reach S3: the listeners of murphy's S3 gateway.

With :class:`~murphy.runtimes.base.JobCredentials` (an S3 endpoint behind the service) every
container reaches S3 only through the authorizing gateway (docs/security.md): a Unix socket in a
directory bind-mounted into Docker containers (network ``none``), or a loopback port (the process
runtime, Docker's network ``host``) that stays the same across a service restart, so the
containers a restarted service re-attaches to keep their endpoint. Without credentials the Docker
runtime keeps the plain byte pump of :mod:`murphy.storage.gateway` (the service's credentials
then reach the containers: runtimes built by hand in tests).
"""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
from pathlib import Path

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes import docker_spec as spec
from murphy.runtimes import files
from murphy.runtimes.base import JobCredentials
from murphy.storage import gateway

log = logging.getLogger(__name__)


def listen_loopback(credentials: JobCredentials, root_dir: Path) -> str:
    """The gateway on 127.0.0.1, on the port the last service used when it is free."""
    root_dir.mkdir(parents=True, exist_ok=True)
    state = root_dir / ".s3-gateway.json"
    port = int((files.read_json(str(state)) or {}).get("port") or 0)
    try:
        url = credentials.listen_tcp("127.0.0.1", port)
    except OSError as e:
        url = credentials.listen_tcp("127.0.0.1", 0)
        log.warning("the S3 gateway cannot listen on its last port %d (%s); on %s now: containers launched "
                    "before this start lose S3", port, e, url)
    state.write_text(json.dumps({"port": int(url.rsplit(":", 1)[1])}), encoding="utf-8")
    return url


def _socket_dir(root_dir: Path) -> Path:
    gdir = root_dir / ".gateway"
    gdir.mkdir(exist_ok=True)
    os.chmod(gdir, 0o755)
    return gdir


def store_access(store: spec.StoreAccess, network: str, root_dir: Path,
                 credentials: JobCredentials | None) -> tuple[spec.StoreAccess, gateway.Forwarder | None]:
    """How the Docker runtime's containers reach ``store``, and the byte pump it started (if any)."""
    if store.buckets_dir or not store.endpoint_url:
        return store, None
    if credentials is not None:
        if network == "host":
            return spec.StoreAccess(endpoint_url=listen_loopback(credentials, root_dir)), None
        if network != "none":
            raise RuntimeBackendError(
                f"MURPHY_DOCKER_NETWORK={network}: containers with per-job S3 credentials reach S3 only through "
                "murphy's gateway, on network 'none' (the default) or 'host'")
        gdir = _socket_dir(root_dir)
        credentials.listen_unix(str(gdir / spec.GATEWAY_SOCKET_NAME))
        return spec.StoreAccess(endpoint_url=store.endpoint_url, gateway_dir=str(gdir)), None
    if network != "none":
        return store, None
    url = urllib.parse.urlsplit(store.endpoint_url)
    if url.scheme != "http" or not url.hostname:
        raise RuntimeBackendError(
            f"S3 endpoint {store.endpoint_url}: containers without a network reach only an http:// endpoint "
            "through murphy's gateway; set MURPHY_DOCKER_NETWORK=host for an https:// endpoint")
    gdir = _socket_dir(root_dir)
    pump = gateway.serve_unix(str(gdir / spec.GATEWAY_SOCKET_NAME), url.hostname, url.port or 80)
    return spec.StoreAccess(endpoint_url=store.endpoint_url, gateway_dir=str(gdir)), pump
