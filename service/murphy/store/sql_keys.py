"""The SQL store's access-key table (``murphy.auth``'s keys), beside the job and event tables.

One row per key; the secret column holds only the sealed form (``murphy.events.sealing``).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from murphy.exceptions import AccessKeyExists, AccessKeyNotFound
from murphy.store.base import AccessKey
from murphy.store.sql_events import DuplicateKey

#: The keys component's schema version (row "keys" in murphy_schema).
KEYS_SCHEMA_VERSION = 1

keys_metadata = sa.MetaData()

access_keys = sa.Table(
    "access_keys",
    keys_metadata,
    sa.Column("access_key_id", sa.String(128), primary_key=True),
    sa.Column("account", sa.String(32), nullable=False, index=True),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("sealed_secret", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("session_token_sha256", sa.String(64), nullable=True),
    sa.Column("expires_at", sa.Double, nullable=True),
    sa.Column("actions", sa.Text, nullable=True),  # JSON list, NULL: every action
)

_k = access_keys.c


def _key(row: Any) -> AccessKey:
    actions = None if row.actions is None else tuple(json.loads(row.actions))
    return AccessKey(row.access_key_id, row.account, row.name, row.sealed_secret, row.status, row.created_at,
                     row.session_token_sha256, row.expires_at, actions)


class SqlKeysMixin:
    """The access-key methods of :class:`murphy.store.sql.SqlJobStore` (which provides ``_tx``)."""

    def _tx(self, what: str, *, write: bool = False) -> contextlib.AbstractContextManager[Connection]:
        raise NotImplementedError

    def create_access_key(self, key: AccessKey) -> None:
        try:
            with self._tx("create access key", write=True) as conn:
                conn.execute(access_keys.insert().values(
                    access_key_id=key.access_key_id, account=key.account, name=key.name,
                    sealed_secret=key.sealed_secret, status=key.status, created_at=key.created_at,
                    session_token_sha256=key.session_token_sha256, expires_at=key.expires_at,
                    actions=None if key.actions is None else json.dumps(list(key.actions)),
                ))
        except DuplicateKey as e:
            raise AccessKeyExists(key.access_key_id) from e

    def get_access_key(self, access_key_id: str) -> AccessKey:
        with self._tx("get access key") as conn:
            row = conn.execute(sa.select(access_keys).where(_k.access_key_id == access_key_id)).first()
        if row is None:
            raise AccessKeyNotFound(access_key_id)
        return _key(row)

    def list_access_keys(self, account: str | None = None) -> list[AccessKey]:
        stmt = sa.select(access_keys).order_by(_k.created_at, _k.access_key_id)
        if account is not None:
            stmt = stmt.where(_k.account == account)
        with self._tx("list access keys") as conn:
            return [_key(r) for r in conn.execute(stmt).all()]

    def set_access_key_status(self, access_key_id: str, status: Literal["Active", "Inactive"]) -> None:
        with self._tx("set access key status", write=True) as conn:
            n = conn.execute(access_keys.update().where(_k.access_key_id == access_key_id)
                             .values(status=status)).rowcount
        if n != 1:
            raise AccessKeyNotFound(access_key_id)

    def delete_access_key(self, access_key_id: str) -> None:
        with self._tx("delete access key", write=True) as conn:
            n = conn.execute(access_keys.delete().where(_k.access_key_id == access_key_id)).rowcount
        if n != 1:
            raise AccessKeyNotFound(access_key_id)

    def delete_expired_access_keys(self, before: float) -> int:
        with self._tx("delete expired access keys", write=True) as conn:
            return int(conn.execute(access_keys.delete().where(
                _k.expires_at.is_not(None), _k.expires_at < before)).rowcount)
