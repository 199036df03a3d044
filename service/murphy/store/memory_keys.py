"""The in-memory store's access keys (same contract as :mod:`murphy.store.sql_keys`)."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Literal

from murphy.exceptions import AccessKeyExists, AccessKeyNotFound
from murphy.store.base import AccessKey


class MemoryKeys:
    """Mixin of :class:`murphy.store.memory.InMemoryJobStore`: its access-key methods."""

    def __init__(self) -> None:
        self._klock = threading.Lock()
        self._keys: dict[str, AccessKey] = {}

    def create_access_key(self, key: AccessKey) -> None:
        with self._klock:
            if key.access_key_id in self._keys:
                raise AccessKeyExists(key.access_key_id)
            self._keys[key.access_key_id] = key

    def get_access_key(self, access_key_id: str) -> AccessKey:
        with self._klock:
            try:
                return self._keys[access_key_id]
            except KeyError:
                raise AccessKeyNotFound(access_key_id) from None

    def list_access_keys(self, account: str | None = None) -> list[AccessKey]:
        with self._klock:
            keys = [k for k in self._keys.values() if account is None or k.account == account]
        return sorted(keys, key=lambda k: (k.created_at, k.access_key_id))

    def set_access_key_status(self, access_key_id: str, status: Literal["Active", "Inactive"]) -> None:
        with self._klock:
            if access_key_id not in self._keys:
                raise AccessKeyNotFound(access_key_id)
            self._keys[access_key_id] = replace(self._keys[access_key_id], status=status)

    def delete_access_key(self, access_key_id: str) -> None:
        with self._klock:
            if self._keys.pop(access_key_id, None) is None:
                raise AccessKeyNotFound(access_key_id)

    def delete_expired_access_keys(self, before: float) -> int:
        with self._klock:
            gone = [k for k, v in self._keys.items() if v.expires_at is not None and v.expires_at < before]
            for k in gone:
                del self._keys[k]
        return len(gone)
