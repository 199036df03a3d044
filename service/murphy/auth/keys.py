"""murphy's access keys: created, listed, disabled and deleted like IAM's, stored sealed.

A key is an id (``AKIA`` + 16 characters; ``ASIA`` for temporary ones, as AWS spells them), a
40-character secret shown once at creation, an account and a name. The job store keeps the
secret sealed with the server's Fernet key (:mod:`murphy.events.sealing`, the same key that seals
webhook secrets), so a copy of the database alone signs nothing. Temporary keys also carry a
session token, of which only the SHA-256 is kept.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets
import string
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from murphy.events import sealing
from murphy.exceptions import AccessKeyNotFound, ValidationException
from murphy.store.base import AccessKey, AccessKeyStore

if TYPE_CHECKING:
    from murphy.settings import Settings

_ID_ALPHABET = string.ascii_uppercase + "234567"
_SECRET_ALPHABET = string.ascii_letters + string.digits + "+/"
_ACCOUNT = re.compile(r"\d{12}")
_NAME = re.compile(r"[\w+=,.@-]{1,64}")
_GIVEN_ID = re.compile(r"[A-Za-z0-9]{16,128}")
#: Temporary credentials: AWS STS's bounds for GetSessionToken.
MIN_SESSION_S, MAX_SESSION_S = 900, 129600


@dataclass(frozen=True)
class ResolvedKey:
    """A key with its secret opened: what the verifier checks a signature against."""

    access_key_id: str
    account: str
    name: str
    active: bool
    session_token_sha256: str | None
    expires_at: float | None
    actions: tuple[str, ...] | None
    secret: str = field(repr=False)


def iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat(timespec="seconds")


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _check(account: str, name: str) -> None:
    if not _ACCOUNT.fullmatch(account):
        raise ValidationException(f"The account must be 12 digits (like an AWS account id), not '{account[:64]}'.")
    if not _NAME.fullmatch(name):
        raise ValidationException(
            f"The key name must be 1-64 characters of letters, digits and +=,.@_- , not '{name[:64]}'.")


class KeyRing:
    """Access keys in ``store`` (the job store's database), sealed with ``settings``' key."""

    def __init__(self, store: AccessKeyStore, settings: Settings, clock: Any = time.time) -> None:
        self.store = store
        self.settings = settings
        self._clock = clock

    def _new(self, prefix: str, account: str, name: str, actions: tuple[str, ...] | None,
             token: str | None, expires_at: float | None, given: tuple[str, str] | None = None) -> tuple[AccessKey, str]:
        akid, secret = given or (prefix + "".join(secrets.choice(_ID_ALPHABET) for _ in range(16)),
                                 "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(40)))
        key = AccessKey(
            access_key_id=akid,
            account=account, name=name, sealed_secret=sealing.seal(secret, self.settings), status="Active",
            created_at=self._clock(), session_token_sha256=None if token is None else token_sha256(token),
            expires_at=expires_at, actions=actions,
        )
        self.store.create_access_key(key)
        return key, secret

    def create(self, account: str, name: str = "default", actions: tuple[str, ...] | None = None,
               given: tuple[str, str] | None = None) -> dict[str, Any]:
        """A new long-term key; the answer is ``aws iam create-access-key``'s (the only time the
        secret is shown). ``given``: (id, secret) chosen by the caller instead of generated (a
        deployment that hands its clients one credential for S3 and murphy, e.g. ``make up``)."""
        _check(account, name)
        if given is not None and not (_GIVEN_ID.fullmatch(given[0]) and 16 <= len(given[1]) <= 128):
            raise ValidationException("A given access key id must be 16-128 letters and digits, its secret "
                                      "16-128 characters.")
        key, secret = self._new("AKIA", account, name, actions, None, None, given)
        return {"AccessKey": {"UserName": name, "AccessKeyId": key.access_key_id, "Status": key.status,
                              "SecretAccessKey": secret, "CreateDate": iso(key.created_at), "Account": account}}

    def create_session(self, account: str, name: str = "session", duration_s: int = 43200,
                       actions: tuple[str, ...] | None = None) -> dict[str, Any]:
        """Temporary credentials, answered as ``aws sts get-session-token`` does."""
        _check(account, name)
        if not MIN_SESSION_S <= duration_s <= MAX_SESSION_S:
            raise ValidationException(f"The duration must be between {MIN_SESSION_S} and {MAX_SESSION_S} seconds.")
        token = secrets.token_urlsafe(96)
        key, secret = self._new("ASIA", account, name, actions, token, self._clock() + duration_s)
        assert key.expires_at is not None
        return {"Credentials": {"AccessKeyId": key.access_key_id, "SecretAccessKey": secret,
                                "SessionToken": token, "Expiration": iso(key.expires_at), "Account": account}}

    def create_job_session(self, account: str, name: str, actions: tuple[str, ...], duration_s: float) -> tuple[str, str, str]:
        """Temporary credentials for one container of a job (:mod:`murphy.auth.s3gateway`):
        ``(access key id, secret, session token)``. ``name`` is murphy's (the container name), not
        a user's, so IAM's name rules do not apply; ``actions`` are the container's S3 grants."""
        token = secrets.token_urlsafe(96)
        key, secret = self._new("ASIA", account, name, actions, token, self._clock() + duration_s)
        return key.access_key_id, secret, token

    def list(self, account: str | None = None) -> dict[str, Any]:
        """``aws iam list-access-keys``' answer (no secrets)."""
        return {"AccessKeyMetadata": [
            {"UserName": k.name, "AccessKeyId": k.access_key_id, "Status": k.status,
             "CreateDate": iso(k.created_at), "Account": k.account,
             **({"Expiration": iso(k.expires_at)} if k.expires_at is not None else {}),
             **({"Actions": list(k.actions)} if k.actions is not None else {})}
            for k in self.store.list_access_keys(account)
        ]}

    def set_status(self, access_key_id: str, status: Literal["Active", "Inactive"]) -> None:
        self.store.set_access_key_status(access_key_id, status)

    def delete(self, access_key_id: str) -> None:
        self.store.delete_access_key(access_key_id)

    def resolve(self, access_key_id: str) -> ResolvedKey | None:
        """The key with its secret opened; None when there is no such key."""
        try:
            key = self.store.get_access_key(access_key_id)
        except AccessKeyNotFound:
            return None
        return ResolvedKey(key.access_key_id, key.account, key.name, key.status == "Active",
                           key.session_token_sha256, key.expires_at, key.actions,
                           secret=sealing.unseal(key.sealed_secret, self.settings))
