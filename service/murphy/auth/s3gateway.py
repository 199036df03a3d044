"""murphy's S3 gateway: the only way a job's containers reach the object store.

Each container gets temporary credentials issued for it (:meth:`S3Gateway.issue`: an ``ASIA``
key with a session token in the job store, its grants as its action list, see
:mod:`murphy.auth.s3policy`) and an endpoint that is this gateway: a Unix socket bind-mounted into
Docker containers (their loopback side is :mod:`murphy.storage.gateway`'s byte pump), a loopback
port for the process runtime, any address a cluster's pods reach for Kubernetes.

Every request is an HTTP/1.1 request parsed here: its SigV4 signature is checked by the same
:class:`murphy.auth.verifier.Verifier` as the API's (S3's rules: the path signed as sent,
``UNSIGNED-PAYLOAD`` allowed), the key's grants decide, and an allowed request is re-signed with
the service's own credentials and forwarded; the response streams back. Anything else is answered
with S3's own error XML (``AccessDenied``, ``InvalidAccessKeyId``, ``SignatureDoesNotMatch``...).
The service's credentials never leave this process.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import logging
import os
import socketserver
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import IO, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from murphy.auth import sigv4
from murphy.auth.keys import KeyRing
from murphy.auth.s3errors import error_for, s3_error
from murphy.auth.s3policy import Grants, Request, decide, grants_for
from murphy.auth.verifier import HttpRequest, Verifier
from murphy.exceptions import AccessKeyNotFound, AuthFailure
from murphy.runtimes.base import Plan, ScopedCredentials, TrainingPlan

log = logging.getLogger(__name__)
_SPOOL_BYTES = 8 << 20  # bodies above this are spooled to disk while hashed
_MAX_BODY = 5 << 30  # S3's largest single PUT
_CHUNK = 256 * 1024
_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer",
                  "transfer-encoding", "upgrade", "expect", "host", "authorization", "x-amz-date",
                  "x-amz-security-token", "x-amz-content-sha256", "content-length"})
#: Rules run as long as their job needs them; a training container at most its MaxRuntime.
_LONGEST_S = 28 * 86400
_GRACE_S = 3600
Frozen = tuple[str, str, str | None]


def _service_credentials() -> Callable[[], Frozen | None]:
    """The service's own credentials (botocore's chain, refreshed when they rotate)."""
    import botocore.session

    creds = botocore.session.Session().get_credentials()

    def frozen() -> Frozen | None:
        if creds is None:
            return None
        f = creds.get_frozen_credentials()
        return str(f.access_key), str(f.secret_key), f.token

    return frozen


class S3Gateway:
    """:class:`murphy.runtimes.base.JobCredentials` over the job store's key table."""

    def __init__(self, keys: KeyRing, upstream_url: str, *, default_account: str = "123456789012",
                 skew_s: float = 300.0, cache_s: float = 5.0,
                 credentials: Callable[[], Frozen | None] | None = None,
                 manifest_prefixes: Callable[[str], list[str]] | None = None,
                 upstream_region: str | None = None) -> None:
        url = urlsplit(upstream_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"the S3 gateway needs an http(s) endpoint, not {upstream_url!r}")
        self.keys = keys
        self.upstream = url
        #: The region signed for upstream (AWS's own S3 needs its bucket's); None: the client's.
        self.upstream_region = upstream_region
        self.default_account = default_account
        self.verifier = Verifier(keys, skew_s=skew_s, cache_s=cache_s)
        self._credentials = credentials or _service_credentials()
        self._manifest_prefixes = manifest_prefixes
        self._servers: list[socketserver.BaseServer] = []
        with contextlib.suppress(Exception):  # what a crash left: expired job keys
            keys.store.delete_expired_access_keys(time.time())

    # --- credentials --------------------------------------------------------------------------

    def issue(self, plan: Plan, endpoint_url: str | None) -> ScopedCredentials:
        grants = grants_for(plan, self._manifest_prefixes)
        longest = _LONGEST_S
        if isinstance(plan, TrainingPlan) and plan.max_runtime_s:
            longest = min(longest, int(plan.max_runtime_s))
        akid, secret, token = self.keys.create_job_session(
            plan.account or self.default_account, plan.container_name, grants.actions(), longest + _GRACE_S)
        env = {"AWS_ACCESS_KEY_ID": akid, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": token}
        if endpoint_url:
            env.update(MURPHY_S3_ENDPOINT_URL=endpoint_url, AWS_ENDPOINT_URL_S3=endpoint_url)
        return ScopedCredentials(akid, env)

    def revoke(self, access_key_id: str) -> None:
        with contextlib.suppress(AccessKeyNotFound):
            self.keys.delete(access_key_id)
        self.verifier.forget(access_key_id)

    # --- listeners ----------------------------------------------------------------------------

    def listen_unix(self, socket_path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
        server = _UnixServer(socket_path, _Handler)
        # Containers run as another user; the directory, not the socket's mode, is the boundary.
        os.chmod(socket_path, 0o666)
        self._serve(server)

    def listen_tcp(self, host: str = "127.0.0.1", port: int = 0) -> str:
        server = _TcpServer((host, port), _Handler)
        self._serve(server)
        return f"http://{host}:{server.server_address[1]}"

    def _serve(self, server: Any) -> None:
        server.gateway = self
        threading.Thread(target=server.serve_forever, name="s3-gateway", daemon=True).start()
        self._servers.append(server)

    def close(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()

    # --- one request --------------------------------------------------------------------------

    def authorize(self, req: HttpRequest, copy_source: str | None) -> tuple[int, str, str] | None:
        """None when ``req`` may pass; else the S3 error to answer (status, code, message)."""
        query = dict(parse_qsl(req.raw_query, keep_blank_values=True))
        try:
            claim = self.verifier.claim(req, query)
            key = self.verifier.key(claim.access_key_id) or self.verifier.load(claim.access_key_id)
            if key is None:
                return 403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."
            principal = self.verifier.verify(req, claim, key, frozenset({"s3"}), s3=True)
        except AuthFailure as e:
            return error_for(e)
        body = req.body if req.method == "POST" else b""
        why = decide(Request(req.method, req.raw_path, req.raw_query, copy_source, body),
                     Grants.from_actions(principal.actions))
        if why is not None:
            log.info("S3 gateway: %s denied to %s", why, principal.name)
            return 403, "AccessDenied", "Access Denied"
        return None

    def sign_upstream(self, method: str, raw_path: str, raw_query: str, headers: dict[str, str],
                      payload: str, region: str) -> dict[str, str]:
        """Headers for the upstream request: the client's, signed with the service's credentials."""
        out = {k: v for k, v in headers.items() if k not in _HOP}
        out["host"] = self.upstream.netloc
        out["x-amz-date"] = time.strftime(sigv4.TIMESTAMP, time.gmtime())
        out["x-amz-content-sha256"] = payload
        creds = self._credentials()
        if creds is None:
            return out
        akid, secret, token = creds
        if token:
            out["x-amz-security-token"] = token
        signed = {k: [v] for k, v in out.items() if k in ("host", "content-md5", "content-type") or k.startswith("x-amz-")}
        out["authorization"] = sigv4.authorization(method, raw_path, raw_query, signed, akid, secret, region, "s3",
                                                   out["x-amz-date"], payload, s3=True)
        return out

    def connect(self) -> http.client.HTTPConnection:
        host, port = self.upstream.hostname or "", self.upstream.port
        if self.upstream.scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=300)
        return http.client.HTTPConnection(host, port, timeout=300)


class _UnixServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    gateway: S3Gateway


class _TcpServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    gateway: S3Gateway


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 300  # an idle keep-alive connection closes after this
    server: _UnixServer | _TcpServer
    _upstream: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("S3 gateway: " + format, *args)  # never the headers: they hold signatures

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass

    def do_GET(self) -> None:
        self._proxy()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

    def finish(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
        super().finish()

    def _send_error_xml(self, status: int, code: str, message: str) -> None:
        body, headers = s3_error(code, message, self.path.split("?", 1)[0])
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(0 if self.command == "HEAD" else len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _read_body(self) -> tuple[bytes, IO[bytes] | None, str, int] | None:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            self.close_connection = True
            self._send_error_xml(411, "MissingContentLength", "You must provide the Content-Length HTTP header.")
            return None
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            self._send_error_xml(400, "InvalidArgument", "Invalid Content-Length")
            return None
        if length < 0 or length > _MAX_BODY:
            self.close_connection = True
            self._send_error_xml(400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size")
            return None
        if length <= _SPOOL_BYTES:
            body = self.rfile.read(length)
            return body, None, hashlib.sha256(body).hexdigest(), length
        digest = hashlib.sha256()
        spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed by _proxy once forwarded
        left = length
        while left:
            data = self.rfile.read(min(_CHUNK, left))
            if not data:
                break
            digest.update(data)
            spool.write(data)
            left -= len(data)
        if left:  # the client went away mid-body: nothing is forwarded
            spool.close()
            self.close_connection = True
            return None
        spool.seek(0)
        return b"", spool, digest.hexdigest(), length

    def _proxy(self) -> None:
        gw = self.server.gateway
        read = self._read_body()
        if read is None:
            return
        body, spool, sha, length = read
        try:
            raw_path, _, raw_query = self.path.partition("?")
            headers: dict[str, list[str]] = {}
            for k, v in self.headers.items():
                headers.setdefault(k.lower(), []).append(v)
            req = HttpRequest(self.command, raw_path, raw_query, headers, body, body_sha256=sha)
            denied = gw.authorize(req, self.headers.get("x-amz-copy-source"))
            if denied is not None:
                self._send_error_xml(*denied)
                return
            payload = req.header("x-amz-content-sha256") or sha
            region = gw.upstream_region or _region(req.header("authorization")) or "us-east-1"
            flat = {k: ",".join(v) for k, v in headers.items()}
            # A presigned request's own signature stays here: upstream gets the service's header
            # signature only (S3 refuses a request that carries two).
            up_query = _without_query_auth(raw_query)
            up_headers = gw.sign_upstream(self.command, raw_path, up_query, flat, payload, region)
            up_headers["content-length"] = str(length)
            self._forward(gw, raw_path, up_query, up_headers, spool if spool is not None else body)
        finally:
            if spool is not None:
                spool.close()

    def _forward(self, gw: S3Gateway, raw_path: str, raw_query: str, headers: dict[str, str],
                 body: bytes | IO[bytes]) -> None:
        target = raw_path + (f"?{raw_query}" if raw_query else "")
        for attempt in (0, 1):  # a kept-alive upstream connection the server closed: once more
            if self._upstream is None:
                self._upstream = gw.connect()
            try:
                self._upstream.request(self.command, target, body=body, headers=headers)
                resp = self._upstream.getresponse()
                break
            except (OSError, http.client.HTTPException) as e:
                self._upstream.close()
                self._upstream = None
                if attempt:
                    log.warning("S3 gateway: the endpoint did not answer: %s", e)
                    self._send_error_xml(503, "ServiceUnavailable", "Please reduce your request rate.")
                    return
                if not isinstance(body, bytes):
                    body.seek(0)
        self._relay(resp)

    def _relay(self, resp: http.client.HTTPResponse) -> None:
        self.send_response(resp.status, resp.reason)
        length = resp.getheader("Content-Length")
        for k, v in resp.getheaders():
            if k.lower() not in ("connection", "keep-alive", "transfer-encoding", "content-length"):
                self.send_header(k, v)
        chunked = length is None and self.command != "HEAD" and resp.status not in (204, 304)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        elif length is not None:
            self.send_header("Content-Length", length)
        self.end_headers()
        if self.command == "HEAD":
            resp.read()
            return
        while True:
            data = resp.read(_CHUNK)
            if not data:
                break
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        if resp.will_close and self._upstream is not None:
            self._upstream.close()
            self._upstream = None


def _region(authorization: str | None) -> str | None:
    """The region the client signed for (the upstream signature uses the same)."""
    if not authorization or "Credential=" not in authorization:
        return None
    parts = authorization.split("Credential=", 1)[1].split(",", 1)[0].split("/")
    return parts[2] if len(parts) == 5 else None


#: The query parameters of a presigned (query-string) SigV4 request.
_QUERY_AUTH = frozenset({"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
                         "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token"})


def _without_query_auth(raw_query: str) -> str:
    """``raw_query`` without a presigned request's authentication parameters, the rest as sent."""
    if "X-Amz-" not in raw_query:
        return raw_query
    return "&".join(p for p in raw_query.split("&") if unquote(p.partition("=")[0]) not in _QUERY_AUTH)
