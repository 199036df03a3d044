"""Cheap S3 reads: SigV4-signed GET, HEAD and ListObjectsV2 over keep-alive ``http.client``.

Why: a boto3 ``get_object`` costs ~3 ms of client CPU (request/response pipeline, event hooks,
response parsing), almost all of it under the GIL, so a trial that opens by reading 1,000 small
index files is bound to ~3 s whatever the concurrency; parsing a 1,000-key listing into dicts
(with a datetime per key) costs ~0.1 s more. Signed here and sent over a pooled connection, a GET
costs a fraction of that (see docs/performance.md §2).

Scope: path-style requests with static or refreshable credentials, against any endpoint URL.
:meth:`FastS3.from_client` declines (returns None) whatever it cannot do exactly like the client
would (virtual-hosted addressing, unsigned or SigV2 clients, proxies, accelerate/dual-stack
endpoints, client certificates, no credentials), and every call raises :class:`FallBack` for a
response it does not understand (3xx, 4xx other than 404/416), upon which the store repeats the
request through boto3: redirects to another region, clock skew and real access errors are then
handled, and mapped, exactly as before. Connection errors and 5xx are retried here (bounded).
:meth:`FastS3.get_many` sends many GETs at once over sockets of its own
(:mod:`murphy.storage.s3batch`); what gets no plain answer there is repeated one at a time.

The signer follows the SigV4 spec for S3 (single URI encoding, no path normalisation, signed
payload hash of the empty body); a test checks it byte-for-byte against botocore's
``S3SigV4Auth``.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ssl
import threading
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Generator, Sequence
from typing import Any, NamedTuple
from urllib.parse import quote, unquote_plus, urlsplit

from murphy.exceptions import ObjectNotFound, StorageError
from murphy.storage.s3batch import UNSURE, Pipeline

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
ATTEMPTS = 4  # connection errors and 5xx: the first try plus three retries
_BACKOFF_S = 0.05
_MAX_IDLE = 32
_RETRY_STATUS = frozenset({500, 502, 503, 504})
_NO_FAST_S3_OPTIONS = ("use_accelerate_endpoint", "use_dualstack_endpoint")


class Frozen(NamedTuple):
    """One consistent set of credentials (botocore's ``ReadOnlyCredentials`` has the same fields)."""

    access_key: str
    secret_key: str
    token: str | None


class FallBack(Exception):
    """The fast path cannot answer this request; repeat it through boto3."""


class SigV4Signer:
    """Signs S3 GETs with AWS Signature Version 4 (header form)."""

    def __init__(self, region: str) -> None:
        self._region = region
        self._keys: dict[tuple[str, str], bytes] = {}  # (secret, yyyymmdd) → signing key

    def _signing_key(self, secret: str, day: str) -> bytes:
        key = self._keys.get((secret, day))
        if key is None:
            key = ("AWS4" + secret).encode()
            for part in (day, self._region, "s3", "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            if len(self._keys) > 8:  # old days or rotated secrets
                self._keys.clear()
            self._keys[(secret, day)] = key
        return key

    def sign(
        self, creds: Frozen, method: str, host: str, path: str, query: str, headers: dict[str, str], amz_date: str | None = None
    ) -> dict[str, str]:
        """Headers for ``method path?query`` on ``host``: ``headers`` (lower-case names) plus auth.

        ``path`` is the URI-encoded request path (S3 signs it as sent, no normalisation) and
        ``query`` the canonical query string (see :func:`canonical_query`).
        """
        amz_date = amz_date or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        out = {**headers, "host": host, "x-amz-content-sha256": EMPTY_SHA256, "x-amz-date": amz_date}
        if creds.token:
            out["x-amz-security-token"] = creds.token
        names = sorted(out)
        signed = ";".join(names)
        canonical = "\n".join(
            [method, path, query, *(f"{n}:{' '.join(out[n].split())}" for n in names), "", signed, EMPTY_SHA256]
        )
        scope = f"{amz_date[:8]}/{self._region}/s3/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(self._signing_key(creds.secret_key, amz_date[:8]), to_sign.encode(), hashlib.sha256).hexdigest()
        out["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={creds.access_key}/{scope}, SignedHeaders={signed}, Signature={signature}"
        )
        return out


def canonical_query(params: dict[str, str]) -> str:
    """The SigV4 canonical query string, which is also sent as the request's query."""
    return "&".join(sorted(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in params.items()))


class ConnectionPool:
    """Idle keep-alive connections to one host; each request borrows one (thread-safe)."""

    def __init__(self, scheme: str, host: str, port: int | None, timeout: float, context: ssl.SSLContext | None) -> None:
        self._scheme, self._host, self._port = scheme, host, port
        self._timeout, self._context = timeout, context
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _borrow(self) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout, context=self._context), False
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout), False

    def send(self, method: str, url: str, headers: dict[str, str]) -> tuple[int, bytes]:
        """``method url`` (path and query): (status, body). Raises OSError/HTTPException on
        connection trouble.

        A reused connection the server has closed in the meantime fails before any response;
        that is retried once at once on a new connection.
        """
        conn, reused = self._borrow()
        try:
            try:
                conn.request(method, url, headers=headers)
                resp = conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                if not reused:
                    raise
                conn.close()
                conn, reused = self._borrow()[0], False
                conn.request(method, url, headers=headers)
                resp = conn.getresponse()
            body = resp.read()
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            with self._lock:
                if len(self._idle) < _MAX_IDLE:
                    self._idle.append(conn)
                    return resp.status, body
            conn.close()
        return resp.status, body

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def __del__(self) -> None:
        # Stores are not closed explicitly; don't leave their sockets to the garbage collector.
        for conn in self._idle:
            conn.close()


class FastS3:
    """Signed path-style GET/HEAD/ListObjectsV2 to one endpoint, shared by a store and its children."""

    def __init__(self, endpoint_url: str, region: str, credentials: Any, *, timeout: float = 60.0, cafile: str | None = None) -> None:
        parts = urlsplit(endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"unsupported endpoint URL: {endpoint_url!r}")
        # The Host header (and so the signed host) leaves out the scheme's default port.
        name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        default_port = 443 if parts.scheme == "https" else 80
        self._host = name if parts.port in (None, default_port) else f"{name}:{parts.port}"
        self._base = parts.path.rstrip("/")
        self._credentials = credentials
        self._signer = SigV4Signer(region)
        context = ssl.create_default_context(cafile=cafile) if parts.scheme == "https" else None
        self._pool = ConnectionPool(parts.scheme, parts.hostname, parts.port, timeout, context)
        self._pipeline = Pipeline(
            parts.hostname, parts.port or default_port, context=context, server_hostname=parts.hostname, timeout=timeout
        )
        self.disabled = False

    @classmethod
    def from_settings(cls, endpoint_url: str, region: str, credentials: Any, cafile: str | None) -> FastS3 | None:
        """For a client that murphy creates itself with this endpoint (path-style, SigV4)."""
        if credentials is None or not hasattr(credentials, "get_frozen_credentials") or _proxied(endpoint_url):
            return None
        try:
            return cls(endpoint_url, region, credentials, cafile=cafile or _default_cafile(endpoint_url))
        except ValueError:
            return None

    @classmethod
    def from_client(cls, client: Any, credentials: Any = None) -> FastS3 | None:
        """A fast path that sends what ``client`` would send, or None where that is not certain."""
        try:
            return cls._from_client(client, credentials)
        except (AttributeError, TypeError, ValueError):
            return None  # an unusual client object: keep to boto3

    @classmethod
    def _from_client(cls, client: Any, credentials: Any) -> FastS3 | None:
        config = client.meta.config
        s3 = config.s3 or {}
        if s3.get("addressing_style") != "path" or any(s3.get(o) for o in _NO_FAST_S3_OPTIONS):
            return None
        if config.signature_version not in (None, "s3v4") or config.proxies or config.client_cert:
            return None
        # botocore offers no public accessor for a client's credentials or TLS settings.
        credentials = credentials if credentials is not None else client._get_credentials()
        if credentials is None or not hasattr(credentials, "get_frozen_credentials"):
            return None
        endpoint = client.meta.endpoint_url
        verify = getattr(getattr(getattr(client, "_endpoint", None), "http_session", None), "_verify", True)
        if verify is False or _proxied(endpoint):
            return None
        cafile = verify if isinstance(verify, str) else _default_cafile(endpoint)
        timeout = float(max(config.connect_timeout or 60, config.read_timeout or 60))
        return cls(endpoint, client.meta.region_name or "us-east-1", credentials, timeout=timeout, cafile=cafile)

    def _frozen(self) -> Frozen:
        c = self._credentials.get_frozen_credentials()
        return Frozen(c.access_key, c.secret_key, c.token)

    def _send(self, method: str, bucket: str, key: str, params: dict[str, str], extra: dict[str, str]) -> tuple[int, bytes]:
        """Sign and send; retry connection errors and 5xx (bounded). (status, body) otherwise."""
        if "--x-s3" in bucket or ":" in bucket:  # S3 Express / ARNs sign differently
            raise FallBack("bucket needs boto3")
        path = f"{self._base}/{bucket}/{quote(key, safe='/~')}" if key else f"{self._base}/{bucket}"
        query = canonical_query(params)
        url = f"{path}?{query}" if query else path
        last = ""
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(_BACKOFF_S * 2 ** (attempt - 1))
            headers = self._signer.sign(self._frozen(), method, self._host, path, query, extra)
            try:
                status, body = self._pool.send(method, url, headers)
            except (OSError, http.client.HTTPException) as e:
                last = f"{type(e).__name__}: {e}"
                continue
            if status not in _RETRY_STATUS:
                return status, body
            last = f"HTTP {status}: {body[:200]!r}"
        raise StorageError(f"S3 {method} s3://{bucket}/{key} failed after {ATTEMPTS} attempts: {last}")

    def get(self, bucket: str, key: str, range_header: str | None, label: str) -> tuple[int, bytes]:
        """(status 200/206/416, body) of a GET; ObjectNotFound(label) on 404; FallBack when unsure."""
        status, body = self._send("GET", bucket, key, {}, {"range": range_header} if range_header else {})
        if status in (200, 206, 416):
            return status, body
        if status == 404:
            raise ObjectNotFound(label)
        raise FallBack(f"GET: HTTP {status}")

    def get_many(self, bucket: str, keys: Sequence[str]) -> Generator[tuple[int, bytes], None, None]:
        """(status, body) of a whole-object GET of each key, in order, pipelined over a few
        sockets (:mod:`murphy.storage.s3batch`). Status 0 (``UNSURE``): no usable answer came;
        the caller repeats that key with :meth:`get`. Other statuses are the server's, unchecked.
        """
        if "--x-s3" in bucket or ":" in bucket:
            for _ in keys:
                yield UNSURE, b""
            return

        def request(i: int) -> bytes:
            path = f"{self._base}/{bucket}/{quote(keys[i], safe='/~')}"
            headers = self._signer.sign(self._frozen(), "GET", self._host, path, "", {})
            lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            return f"GET {path} HTTP/1.1\r\n{lines}\r\n".encode("latin-1")

        for _, status, body in self._pipeline.get_all(len(keys), request):
            yield status, body

    def exists(self, bucket: str, key: str) -> bool:
        """HEAD: True on 200, False on 404; FallBack otherwise."""
        status, _ = self._send("HEAD", bucket, key, {}, {})
        if status in (200, 404):
            return status == 200
        raise FallBack(f"HEAD: HTTP {status}")

    def list_page(self, bucket: str, prefix: str, start_after: str | None, token: str | None) -> tuple[list[str], str | None]:
        """One ListObjectsV2 page: (full keys, continuation token or None when it is the last)."""
        params = {"list-type": "2", "prefix": prefix, "encoding-type": "url"}
        if start_after:
            params["start-after"] = start_after
        if token:
            params["continuation-token"] = token
        status, body = self._send("GET", bucket, "", params, {})
        if status != 200:
            raise FallBack(f"LIST: HTTP {status}")
        try:
            return parse_list_page(body)
        except ET.ParseError as e:
            raise FallBack(f"LIST: unreadable response ({e})") from None

    def close(self) -> None:
        self._pool.close()
        self._pipeline.close()


def _proxied(endpoint_url: str) -> bool:
    """True if the environment routes this endpoint through a proxy (boto3 would honour it)."""
    parts = urlsplit(endpoint_url)
    return parts.scheme in urllib.request.getproxies_environment() and not urllib.request.proxy_bypass(parts.hostname or "")


def _default_cafile(endpoint_url: str) -> str | None:
    if not endpoint_url.startswith("https:"):
        return None
    from botocore.httpsession import get_cert_path

    path: str | None = get_cert_path(True)
    return path


def parse_list_page(body: bytes) -> tuple[list[str], str | None]:
    """Keys and next continuation token of a ListObjectsV2 response (any or no XML namespace)."""
    # The configured endpoint's answer, which boto3 would parse too; expat (>= 2.4.1, bundled
    # with every supported Python) bounds entity expansion.
    root = ET.fromstring(body)
    ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    keys = [k.text or "" for k in root.iterfind(f"{ns}Contents/{ns}Key")]
    if (root.findtext(f"{ns}EncodingType") or "") == "url":
        keys = [unquote_plus(k) for k in keys]
    truncated = (root.findtext(f"{ns}IsTruncated") or "").strip().lower() == "true"
    token = root.findtext(f"{ns}NextContinuationToken") if truncated else None
    if truncated and not token:
        raise FallBack("LIST: truncated page without a continuation token")
    return keys, token
