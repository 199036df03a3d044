"""The access-key table on every backend (memory, SQLite, PostgreSQL): create, get, list by
account, status, delete, expiry; errors are the store's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.jobstore_support import pg_schema_url
from murphy.exceptions import AccessKeyExists, AccessKeyNotFound
from murphy.store import open_job_store
from murphy.store.base import AccessKey, AccessKeyStore


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AccessKeyStore]:
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/murphy.db"
    else:
        url = pg_schema_url(request.getfixturevalue("postgres_url"))
    s = open_job_store(url)
    assert isinstance(s, AccessKeyStore)
    yield s
    s.close()


def key(akid: str, account: str = "111111111111", created: float = 1.0, **extra: object) -> AccessKey:
    return AccessKey(akid, account, "n-" + akid, "fernet:v1:sealed", "Active", created, **extra)  # type: ignore[arg-type]


def test_create_get_list(store: AccessKeyStore) -> None:
    a, b = key("AKIA1", created=2.0), key("AKIA2", "222222222222", created=1.0, actions=("sagemaker:List*",))
    store.create_access_key(a)
    store.create_access_key(b)
    assert store.get_access_key("AKIA1") == a
    assert store.get_access_key("AKIA2").actions == ("sagemaker:List*",)
    assert [k.access_key_id for k in store.list_access_keys()] == ["AKIA2", "AKIA1"]  # oldest first
    assert store.list_access_keys("111111111111") == [a]
    with pytest.raises(AccessKeyExists):
        store.create_access_key(key("AKIA1"))
    with pytest.raises(AccessKeyNotFound):
        store.get_access_key("AKIA3")


def test_status_delete_and_expiry(store: AccessKeyStore) -> None:
    store.create_access_key(key("AKIA1"))
    store.create_access_key(key("ASIA1", session_token_sha256="ab" * 32, expires_at=10.0))
    store.create_access_key(key("ASIA2", session_token_sha256="cd" * 32, expires_at=30.0))
    store.set_access_key_status("AKIA1", "Inactive")
    assert store.get_access_key("AKIA1").status == "Inactive"
    assert store.get_access_key("ASIA1").session_token_sha256 == "ab" * 32
    assert store.delete_expired_access_keys(20.0) == 1
    assert {k.access_key_id for k in store.list_access_keys()} == {"AKIA1", "ASIA2"}
    store.delete_access_key("AKIA1")
    for call in (lambda: store.delete_access_key("AKIA1"), lambda: store.set_access_key_status("AKIA1", "Active")):
        with pytest.raises(AccessKeyNotFound):
            call()
