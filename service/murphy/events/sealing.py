"""Webhook secrets at rest: sealed with a server key before they reach the job store.

The job store (a SQLite file, or a PostgreSQL database that is backed up and may be read by
others) holds each subscription's target. A webhook secret is what proves a delivery came from
this server, so the store keeps it sealed: ``fernet:v1:<token>`` (Fernet: AES-128-CBC +
HMAC-SHA256, from ``cryptography``). The key is ``MURPHY_SECRET_KEY`` (a Fernet key; to rotate,
several comma-separated, the new one first: it seals, all of them open) or, when that is unset,
``<data_dir>/secret.key``, created on first use with mode 0600. Every process that
delivers events for the same database needs the same key. Secrets stored in plain text (before
sealing existed) still work, and the bus seals them when it starts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

    from murphy.settings import Settings

PREFIX = "fernet:v1:"
KEY_FILE = "secret.key"


class SecretUnavailable(ValueError):
    """A sealed secret that this server's key does not open."""


def _fernet(settings: Settings) -> MultiFernet:
    from cryptography.fernet import Fernet, MultiFernet

    given = settings.secret_key.get_secret_value() if settings.secret_key else ""
    # Several keys, comma-separated, rotate: the first seals, any of them opens.
    keys = [k.strip() for k in given.split(",") if k.strip()] or [_key_file(settings.data_dir / KEY_FILE).strip()]
    try:
        # Padding restored: shells' KEY=VALUE readers tend to drop a trailing "=".
        return MultiFernet([Fernet((k + "=" * (-len(k) % 4)).encode("ascii")) for k in keys])
    except (ValueError, UnicodeEncodeError) as e:
        raise ValueError(
            "MURPHY_SECRET_KEY must be a Fernet key (or several, comma-separated, the newest first): "
            "32 bytes in URL-safe base64 "
            "(python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
        ) from e


def _key_file(path: Path) -> str:
    """The key in ``path``, created (0600, exclusively: two first starts agree) if missing."""
    from cryptography.fernet import Fernet

    try:
        return path.read_text()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return path.read_text()
    with os.fdopen(fd, "wb") as f:
        f.write(key)
        f.flush()
        os.fsync(f.fileno())
    return key.decode("ascii")


def check_key(settings: Settings) -> None:
    """Fail now (at server start) on an unusable key rather than at the first subscription."""
    _fernet(settings)


def is_sealed(stored: str) -> bool:
    return stored.startswith(PREFIX)


def seal(secret: str, settings: Settings) -> str:
    """The form of ``secret`` to store."""
    return PREFIX + _fernet(settings).encrypt(secret.encode("utf-8")).decode("ascii")


def unseal(stored: str, settings: Settings) -> str:
    """The secret from its stored form (plain text from before sealing passes through)."""
    if not is_sealed(stored):
        return stored
    from cryptography.fernet import InvalidToken

    try:
        return _fernet(settings).decrypt(stored[len(PREFIX):].encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError) as e:
        raise SecretUnavailable(
            "cannot open the webhook secret: it was sealed with another key (set MURPHY_SECRET_KEY, "
            f"or {settings.data_dir / KEY_FILE}, to the key of the server that created the subscription)"
        ) from e
