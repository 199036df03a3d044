"""Signature Version 4 as AWS checks it: what a client claims (``Authorization`` header or
presigned query), and the canonical request / string to sign / signature of the request as it
arrived. Pure functions; :mod:`murphy.auth.verifier` decides what to accept.

The canonical request is the one botocore's ``SigV4Auth`` signs (``botocore/auth.py``):

    METHOD \\n quote(remove_dot_segments(path), safe="/~") \\n sorted query \\n
    "name:trimmed,values" per signed header \\n \\n signed;header;names \\n payload hash

The path is the raw one the client sent (already percent-encoded once, then encoded again, as
every AWS service except S3 does). Query pairs are decoded and re-encoded strictly (``-_.~`` kept)
then sorted, as AWS does, so a client that encodes ``:`` or not signs the same string. The
payload hash is ``X-Amz-Content-Sha256`` when the client sent one (then it must be the body's
hash, or ``UNSIGNED-PAYLOAD`` where that is allowed) and the body's SHA-256 otherwise.
"""

from __future__ import annotations

import calendar
import datetime as dt
import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import quote, unquote

from murphy.exceptions import IncompleteSignatureException, InvalidSignatureException

ALGORITHM = "AWS4-HMAC-SHA256"
TERMINATOR = "aws4_request"
TIMESTAMP = "%Y%m%dT%H%M%SZ"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
#: Longest a presigned URL may be valid, as AWS allows (7 days).
MAX_EXPIRES_S = 604800
_AUTHORIZATION = re.compile(r"AWS4-HMAC-SHA256 Credential=([^,\s]+), ?SignedHeaders=([^,\s]+), ?Signature=([0-9a-f]{64})")
_BASIC_ISO = re.compile(r"\d{8}T\d{6}Z")
_REGION = re.compile(r"[a-z0-9-]{1,32}")
_DATE = re.compile(r"\d{8}")
_SHOWN = 512  # characters of a client's Authorization value quoted back in an error


@dataclass(slots=True)
class Claim:
    """What a signed request says about itself."""

    access_key_id: str
    scope_date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str
    #: ``yyyymmddThhmmssZ``: X-Amz-Date (or the Date header), the time in the string to sign.
    timestamp: str
    #: The same time, in epoch seconds.
    when: int
    session_token: str | None
    #: Presigned (query) requests: X-Amz-Expires; None for the Authorization header.
    expires_s: int | None = None

    @property
    def scope(self) -> str:
        return f"{self.scope_date}/{self.region}/{self.service}/{TERMINATOR}"


def _incomplete(problems: list[str], shown: str) -> IncompleteSignatureException:
    return IncompleteSignatureException(" ".join(problems) + f" Authorization={shown[:_SHOWN]}")


#: Credential strings and timestamps recur on every request of a client (same key, date, region,
#: second): parsing each once saves a third of the verifier's time. Bounded, cleared when full.
_MEMO_MAX = 4096
_credentials: dict[str, tuple[str, str, str, str]] = {}
_stamps: dict[str, int] = {}


def _parse_credential(credential: str) -> tuple[str, str, str, str]:
    found = _credentials.get(credential)
    if found is None:
        found = _parse_credential_uncached(credential)
        if len(_credentials) >= _MEMO_MAX:
            _credentials.clear()
        _credentials[credential] = found
    return found


def _parse_credential_uncached(credential: str) -> tuple[str, str, str, str]:
    parts = credential.split("/")
    if len(parts) != 5:
        raise IncompleteSignatureException(
            "Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term, "
            f"got '{credential[:_SHOWN]}'")
    akid, date, region, service, term = parts
    if term != TERMINATOR:
        raise IncompleteSignatureException(
            f"Credential should be scoped with a valid terminator: '{TERMINATOR}', not '{term[:64]}'.")
    if not akid:
        raise IncompleteSignatureException("Credential should have an access key id before the first '/'.")
    if not _REGION.fullmatch(region):
        raise IncompleteSignatureException(f"Credential should be scoped to a valid region, not '{region[:64]}'.")
    if not _DATE.fullmatch(date):
        raise IncompleteSignatureException(f"Credential should be scoped to a valid date (YYYYMMDD), not '{date[:64]}'.")
    return akid, date, region, service


def _basic_iso(stamp: str) -> int:
    found = _stamps.get(stamp)
    if found is None:
        found = _basic_iso_uncached(stamp)
        if len(_stamps) >= _MEMO_MAX:
            _stamps.clear()
        _stamps[stamp] = found
    return found


def _basic_iso_uncached(stamp: str) -> int:
    # strptime costs ~40 us; this is a tenth of it.
    if not _BASIC_ISO.fullmatch(stamp):
        raise ValueError(stamp)
    y, mo, d, h, mi, sec = (int(stamp[0:4]), int(stamp[4:6]), int(stamp[6:8]),
                            int(stamp[9:11]), int(stamp[11:13]), int(stamp[13:15]))
    if not (1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1] and h < 24 and mi < 60 and sec < 60):
        raise ValueError(stamp)
    return calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0))


def _timestamp(amz_date: str | None, date: str | None, shown: str) -> tuple[str, int]:
    if amz_date is not None:
        try:
            when = _basic_iso(amz_date)
        except ValueError:
            raise IncompleteSignatureException(
                f"Date must be in ISO-8601 'basic format'. Got '{amz_date[:64]}'. "
                "See http://en.wikipedia.org/wiki/ISO_8601") from None
        return amz_date, when
    if date is not None:
        try:
            parsed = parsedate_to_datetime(date)
        except (TypeError, ValueError):
            parsed = None
        if parsed is None:
            raise IncompleteSignatureException(f"Date must be an RFC 1123 date. Got '{date[:64]}'.")
        # "-0000" (what Python's formatdate writes) parses as naive: it is UTC.
        utc = parsed.replace(tzinfo=dt.timezone.utc) if parsed.tzinfo is None else parsed.astimezone(dt.timezone.utc)
        return utc.strftime(TIMESTAMP), int(utc.timestamp())
    raise _incomplete(["Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."], shown)


def parse_header(authorization: str, amz_date: str | None, date: str | None,
                 session_token: str | None) -> Claim:
    """The claim in an ``Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
    Signature=...`` header (IncompleteSignatureException, with AWS's wording, when it is not one)."""
    fast = _AUTHORIZATION.fullmatch(authorization)
    if fast is not None and (amz_date is not None or date is not None):
        # What every AWS SDK sends; the general parser below explains anything else.
        akid, scope_date, region, service = _parse_credential(fast.group(1))
        timestamp, when = _timestamp(amz_date, date, authorization)
        return Claim(akid, scope_date, region, service, _signed_headers(fast.group(2)), fast.group(3),
                     timestamp, when, session_token)
    algorithm, _, rest = authorization.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise _incomplete([f"Unsupported AWS 'algorithm': '{algorithm[:64]}'; murphy verifies {ALGORITHM}."],
                          authorization)
    params: dict[str, str] = {}
    for item in rest.split(","):
        key, sep, value = item.strip().partition("=")
        if sep:
            params[key] = value
    missing = [f"Authorization header requires '{p}' parameter." for p in ("Credential", "Signature", "SignedHeaders")
               if not params.get(p)]
    stamp: tuple[str, int] | None = None
    try:
        stamp = _timestamp(amz_date, date, authorization)
    except IncompleteSignatureException:
        if missing or (amz_date is None and date is None):
            missing.append("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
        else:
            raise
    if missing:
        raise _incomplete(missing, authorization)
    assert stamp is not None
    akid, scope_date, region, service = _parse_credential(params["Credential"])
    return Claim(akid, scope_date, region, service, _signed_headers(params["SignedHeaders"]),
                 params["Signature"], stamp[0], stamp[1], session_token)


def parse_query(query: Mapping[str, str]) -> Claim:
    """The claim of a presigned request (``X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=...``)."""
    shown = "&".join(f"{k}={v}" for k, v in query.items() if k.startswith("X-Amz-"))
    if query.get("X-Amz-Algorithm") != ALGORITHM:
        raise _incomplete([f"X-Amz-Algorithm only supports '{ALGORITHM}'."], shown)
    missing = [f"AWS query-string parameters must include '{p}'." for p in
               ("X-Amz-Credential", "X-Amz-Signature", "X-Amz-SignedHeaders", "X-Amz-Date", "X-Amz-Expires")
               if not query.get(p)]
    if missing:
        raise _incomplete([*missing, "Re-examine the query-string parameters."], shown)
    expires = query["X-Amz-Expires"]
    if not expires.isdigit() or not 1 <= int(expires) <= MAX_EXPIRES_S:
        raise IncompleteSignatureException(
            f"X-Amz-Expires must be a number of seconds between 1 and {MAX_EXPIRES_S}, not '{expires[:32]}'.")
    timestamp, when = _timestamp(query["X-Amz-Date"], None, shown)
    akid, scope_date, region, service = _parse_credential(query["X-Amz-Credential"])
    return Claim(akid, scope_date, region, service, _signed_headers(query["X-Amz-SignedHeaders"]),
                 query["X-Amz-Signature"], timestamp, when, query.get("X-Amz-Security-Token"), int(expires))


_signed: dict[str, tuple[str, ...]] = {}


def _signed_headers(value: str) -> tuple[str, ...]:
    names = _signed.get(value)
    if names is None:
        names = tuple(value.split(";"))
        if "host" not in names and ":authority" not in names:
            raise IncompleteSignatureException("'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")
        if len(_signed) >= _MEMO_MAX:
            _signed.clear()
        _signed[value] = names
    return names


# --- the canonical request ----------------------------------------------------------------------


def _remove_dot_segments(path: str) -> str:
    # RFC 3986 5.2.4, and consecutive slashes collapse: what botocore.utils.remove_dot_segments does.
    out: list[str] = []
    for segment in path.split("/"):
        if segment and segment != ".":
            if segment == "..":
                if out:
                    out.pop()
            else:
                out.append(segment)
    first = "/" if path.startswith("/") else ""
    last = "/" if path.endswith("/") and out else ""
    return first + "/".join(out) + last


def canonical_path(raw_path: str, *, s3: bool = False) -> str:
    if s3:
        # S3 signs the path exactly as sent: encoded once, never normalised (``a/../b`` is a key).
        return raw_path or "/"
    if raw_path == "/":
        return raw_path  # POST / : every AWS JSON request
    return quote(_remove_dot_segments(raw_path) if raw_path else "/", safe="/~")


def canonical_query(raw_query: str, *, drop_signature: bool) -> str:
    if not raw_query:
        return ""
    pairs = []
    for item in raw_query.split("&") if raw_query else []:
        key, _, value = item.partition("=")
        key, value = unquote(key), unquote(value)
        if drop_signature and key == "X-Amz-Signature":
            continue
        pairs.append((quote(key, safe="-_.~"), quote(value, safe="-_.~")))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def canonical_headers(headers: Mapping[str, Sequence[str]], signed: Sequence[str]) -> str:
    """``headers``: lower-case name → every value received (in order). A signed header that did
    not arrive signs as empty, so the signature cannot match."""
    out = []
    for name in signed:
        values = headers.get(name, ())
        value = " ".join(values[0].split()) if len(values) == 1 else ",".join(" ".join(v.split()) for v in values)
        out.append(f"{name}:{value}\n")
    return "".join(out)


def canonical_request(method: str, raw_path: str, raw_query: str, headers: Mapping[str, Sequence[str]],
                      claim: Claim, payload_hash: str, *, s3: bool = False) -> str:
    return "\n".join([
        method.upper(),
        canonical_path(raw_path, s3=s3),
        canonical_query(raw_query, drop_signature=claim.expires_s is not None),
        canonical_headers(headers, claim.signed_headers),
        ";".join(claim.signed_headers),
        payload_hash,
    ])


def string_to_sign(claim: Claim, canonical: str) -> str:
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return f"{ALGORITHM}\n{claim.timestamp}\n{claim.scope}\n{digest}"


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = hmac.new(f"AWS4{secret}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, TERMINATOR):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def signature(key: bytes, to_sign: str) -> str:
    return hmac.digest(key, to_sign.encode("utf-8"), "sha256").hex()


def payload_hash(declared: str | None, body: bytes, *, unsigned_allowed: bool, body_sha256: str | None = None) -> str:
    """The hash the canonical request ends with, checked against the body (``body_sha256``: its
    hash computed already, for a body spooled to disk)."""
    actual = body_sha256 or (hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256)
    if declared is None:
        return actual
    if declared == UNSIGNED_PAYLOAD and unsigned_allowed:
        return declared
    if declared != actual:
        # AWS (S3) says XAmzContentSHA256Mismatch; the JSON services answer a bad signature.
        raise InvalidSignatureException(
            "The provided 'x-amz-content-sha256' header does not match what was computed.")
    return declared


def authorization(method: str, raw_path: str, raw_query: str, headers: Mapping[str, Sequence[str]],
                  access_key_id: str, secret: str, region: str, service: str, timestamp: str,
                  payload: str, *, s3: bool = False) -> str:
    """The ``Authorization`` value for a request signed with ``secret`` (``headers`` lower-case,
    already holding ``x-amz-date`` and every header to sign): what a client computes, from the
    same canonical request the verifier checks (murphy's S3 gateway re-signs with it)."""
    signed = tuple(sorted(headers))
    claim = Claim(access_key_id, timestamp[:8], region, service, signed, "", timestamp, 0, None)
    canonical = canonical_request(method, raw_path, raw_query, headers, claim, payload, s3=s3)
    sig = signature(signing_key(secret, claim.scope_date, region, service), string_to_sign(claim, canonical))
    return f"{ALGORITHM} Credential={access_key_id}/{claim.scope}, SignedHeaders={';'.join(signed)}, Signature={sig}"
