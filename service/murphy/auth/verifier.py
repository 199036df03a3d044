"""The one check every request passes when ``--auth sigv4``: is it signed, by which key, for
which account, and is the signature the one AWS would compute.

Split in three steps so the ASGI middleware never blocks its event loop on the job store:
:meth:`Verifier.claim` (parse, pure), :meth:`Verifier.key` (cached) or :meth:`Verifier.load`
(a store read, run in a thread on a cache miss), then :meth:`Verifier.verify` (pure CPU:
canonical request, one HMAC with a cached signing key, a constant-time compare).

Errors are AWS's (``murphy.exceptions.AuthFailure`` subclasses) with AWS's wording. A key found
once is cached for ``cache_s`` seconds, so disabling or deleting one takes effect within that
time (docs/security.md); unknown ids are not cached.
"""

from __future__ import annotations

import fnmatch
import hmac
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from murphy.auth import sigv4
from murphy.auth.keys import KeyRing, ResolvedKey, token_sha256
from murphy.exceptions import (
    AccessDeniedException,
    ExpiredTokenException,
    InvalidSignatureException,
    MissingAuthenticationTokenException,
    UnrecognizedClientException,
)

BAD_SIGNATURE = ("The request signature we calculated does not match the signature you provided. "
                 "Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
INVALID_TOKEN = "The security token included in the request is invalid."
_SIGNING_KEYS_MAX = 4096


@dataclass(frozen=True)
class Principal:
    """Who signed a verified request."""

    access_key_id: str
    account: str
    name: str
    region: str
    actions: tuple[str, ...] | None

    @property
    def arn(self) -> str:
        return f"arn:aws:iam::{self.account}:user/{self.name}"

    def may(self, action: str) -> bool:
        return self.actions is None or any(fnmatch.fnmatchcase(action, a) for a in self.actions)

    def require(self, action: str) -> None:
        if not self.may(action):
            raise AccessDeniedException(
                f"User: {self.arn} is not authorized to perform: {action} because no identity-based policy "
                f"allows the {action} action")


@dataclass(slots=True)
class HttpRequest:
    """A request as received: raw path and query, headers by lower-case name, the whole body."""

    method: str
    raw_path: str
    raw_query: str
    headers: Mapping[str, Sequence[str]]
    body: bytes
    secure: bool = False
    #: The body's SHA-256 when already computed (a body spooled to disk; ``body`` is then empty).
    body_sha256: str | None = None

    def header(self, name: str) -> str | None:
        values = self.headers.get(name)
        return values[0] if values else None


def _fmt(epoch: int) -> str:
    return time.strftime(sigv4.TIMESTAMP, time.gmtime(epoch))


class Verifier:
    def __init__(self, keys: KeyRing, *, skew_s: float = 300.0, cache_s: float = 5.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.keys = keys
        self.skew_s = skew_s
        self.cache_s = cache_s
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, ResolvedKey]] = {}
        self._signing: dict[tuple[str, str, str, str], bytes] = {}
        self._principals: dict[tuple[str, str], Principal] = {}

    def now(self) -> float:
        return self._clock()

    # --- step 1: what the request claims ----------------------------------------------------------

    def claim(self, req: HttpRequest, query: Mapping[str, str]) -> sigv4.Claim:
        authorization = req.header("authorization")
        if authorization:
            return sigv4.parse_header(authorization, req.header("x-amz-date"), req.header("date"),
                                      req.header("x-amz-security-token"))
        if "X-Amz-Algorithm" in query or "X-Amz-Signature" in query:
            return sigv4.parse_query(query)
        raise MissingAuthenticationTokenException("Missing Authentication Token")

    # --- step 2: the key ------------------------------------------------------------------------

    def key(self, access_key_id: str) -> ResolvedKey | None:
        """The cached key, or None (then :meth:`load` it)."""
        hit = self._cache.get(access_key_id)
        if hit is not None and hit[0] > self._clock():
            return hit[1]
        return None

    def load(self, access_key_id: str) -> ResolvedKey | None:
        """Read the key from the store (blocking) and cache it."""
        key = self.keys.resolve(access_key_id)
        if key is not None:
            with self._lock:
                self._cache[access_key_id] = (self._clock() + self.cache_s, key)
        return key

    def forget(self, access_key_id: str | None = None) -> None:
        with self._lock:
            if access_key_id is None:
                self._cache.clear()
            else:
                self._cache.pop(access_key_id, None)

    # --- step 3: the signature ----------------------------------------------------------------------

    def verify(self, req: HttpRequest, claim: sigv4.Claim, key: ResolvedKey | None,
               services: frozenset[str], *, s3: bool = False) -> Principal:
        """``s3``: S3's rules (murphy's S3 gateway): the path signed as sent, and
        ``UNSIGNED-PAYLOAD`` allowed over plain HTTP, as S3 allows it."""
        now = self._clock()
        if key is None or not key.active:
            raise UnrecognizedClientException(INVALID_TOKEN)
        self._check_token(claim, key, now)
        if claim.service not in services:
            wanted = sorted(services)[0]
            raise InvalidSignatureException(f"Credential should be scoped to correct service: '{wanted}'. ")
        if claim.scope_date != claim.timestamp[:8]:
            raise InvalidSignatureException(
                "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
                f"'{claim.scope_date}' != '{claim.timestamp[:8]}', from '{claim.timestamp}'.")
        self._check_time(claim, now)
        declared = req.header("x-amz-content-sha256")
        if declared is None and s3 and claim.expires_s is not None:
            declared = sigv4.UNSIGNED_PAYLOAD  # an S3 presigned URL signs no payload hash
        payload = sigv4.payload_hash(declared, req.body, unsigned_allowed=req.secure or s3,
                                     body_sha256=req.body_sha256)
        canonical = sigv4.canonical_request(req.method, req.raw_path, req.raw_query, req.headers, claim, payload, s3=s3)
        expected = sigv4.signature(self._signing_key(key, claim), sigv4.string_to_sign(claim, canonical))
        if not hmac.compare_digest(expected.encode(), claim.signature.encode()):
            raise InvalidSignatureException(BAD_SIGNATURE)
        found = self._principals.get((key.access_key_id, claim.region))
        if found is None or found.account != key.account or found.actions != key.actions:
            found = Principal(key.access_key_id, key.account, key.name, claim.region, key.actions)
            with self._lock:
                if len(self._principals) >= _SIGNING_KEYS_MAX:
                    self._principals.clear()
                self._principals[(key.access_key_id, claim.region)] = found
        return found

    def _check_token(self, claim: sigv4.Claim, key: ResolvedKey, now: float) -> None:
        if key.session_token_sha256 is None:
            if claim.session_token:  # a token the key was never given
                raise UnrecognizedClientException(INVALID_TOKEN)
            return
        given = token_sha256(claim.session_token or "")
        if not hmac.compare_digest(given.encode(), key.session_token_sha256.encode()):
            raise UnrecognizedClientException(INVALID_TOKEN)
        if key.expires_at is not None and now >= key.expires_at:
            raise ExpiredTokenException("The security token included in the request is expired")

    def _check_time(self, claim: sigv4.Claim, now: float) -> None:
        current = int(now)
        skew = int(self.skew_s)
        minutes = f"{self.skew_s / 60:g} min."
        if claim.when - skew > current:
            raise InvalidSignatureException(
                f"Signature not yet current: {claim.timestamp} is still later than {_fmt(current + skew)} "
                f"({_fmt(current)} + {minutes})")
        if claim.expires_s is not None:  # presigned: valid for X-Amz-Expires from its date
            if claim.when + claim.expires_s < current:
                raise InvalidSignatureException(
                    f"Signature expired: {claim.timestamp} is now earlier than "
                    f"{_fmt(current - claim.expires_s)} ({_fmt(current)} - {claim.expires_s} sec.)")
            return
        if claim.when + skew < current:
            raise InvalidSignatureException(
                f"Signature expired: {claim.timestamp} is now earlier than {_fmt(current - skew)} "
                f"({_fmt(current)} - {minutes})")

    def _signing_key(self, key: ResolvedKey, claim: sigv4.Claim) -> bytes:
        # The derived key depends only on (secret, date, region, service): 4 HMACs saved per call.
        cache_key = (key.access_key_id, claim.scope_date, claim.region, claim.service)
        found = self._signing.get(cache_key)
        if found is None:
            found = sigv4.signing_key(key.secret, claim.scope_date, claim.region, claim.service)
            with self._lock:
                if len(self._signing) >= _SIGNING_KEYS_MAX:
                    self._signing.clear()
                self._signing[cache_key] = found
        return found
