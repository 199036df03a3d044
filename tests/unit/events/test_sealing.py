"""Webhook secrets are sealed in the job store with the server's key (murphy.events.sealing)."""

from __future__ import annotations

import logging
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from eventkit import Receiver, new_job
from pydantic import SecretStr

from murphy.events.bus import EventBus
from murphy.events.sealing import KEY_FILE, SecretUnavailable, check_key, seal, unseal
from murphy.events.webhook import SIGNATURE_HEADER, verify_signature
from murphy.settings import Settings
from murphy.store import open_job_store


def _db_bytes(db: Path) -> bytes:
    """The database file and its write-ahead log (murphy's SQLite runs in WAL mode: fresh
    writes live in the -wal file until a checkpoint)."""
    wal = db.with_name(db.name + "-wal")
    return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_the_key_file_is_made_once_private_and_reused(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "d")
    sealed = seal("s3cr3t", settings)
    key_file = tmp_path / "d" / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert sealed.startswith("fernet:v1:") and "s3cr3t" not in sealed
    assert seal("s3cr3t", settings) != sealed  # a fresh IV every time
    assert unseal(sealed, Settings(data_dir=tmp_path / "d")) == "s3cr3t"  # another process, same dir
    assert key_file.read_text() == key_file.read_text().strip() and len(key_file.read_text()) == 44


def test_a_configured_key_is_used_instead_of_a_file(tmp_path: Path) -> None:
    key = Fernet.generate_key().decode()
    a = Settings(data_dir=tmp_path / "a", secret_key=key)
    sealed = seal("x", a)
    assert not (tmp_path / "a" / KEY_FILE).exists()
    assert unseal(sealed, Settings(data_dir=tmp_path / "b", secret_key=key)) == "x"
    with pytest.raises(SecretUnavailable, match="sealed with another key"):
        unseal(sealed, Settings(data_dir=tmp_path / "c"))


def test_keys_rotate_the_first_seals_any_opens(tmp_path: Path) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    sealed_before = seal("x", Settings(data_dir=tmp_path, secret_key=old))
    rotated = Settings(data_dir=tmp_path, secret_key=f"{new}, {old}")
    assert unseal(sealed_before, rotated) == "x"
    sealed_after = seal("y", rotated)
    assert unseal(sealed_after, Settings(data_dir=tmp_path, secret_key=new)) == "y"
    with pytest.raises(SecretUnavailable):
        unseal(sealed_after, Settings(data_dir=tmp_path, secret_key=old))


def test_plain_text_from_before_sealing_passes_through(tmp_path: Path) -> None:
    assert unseal("an-old-plain-secret", Settings(data_dir=tmp_path)) == "an-old-plain-secret"


def test_an_unusable_key_is_refused_at_start_with_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must be a Fernet key"):
        check_key(Settings(data_dir=tmp_path, secret_key="not-a-key"))
    store = open_job_store("memory://")
    bus = EventBus(store, Settings(data_dir=tmp_path, secret_key="not-a-key"))
    with pytest.raises(ValueError, match=r"Fernet\.generate_key"):
        bus.start()
    bus.close()
    store.close()


def test_the_database_never_holds_the_secret_and_a_wrong_key_loses_no_event(
        tmp_path: Path, settings: Settings, receiver_factory: Callable[..., Receiver],
        caplog: pytest.LogCaptureFixture) -> None:
    from murphy.jobs.events import events_for

    rx = receiver_factory()
    db = tmp_path / "jobs.db"
    store = open_job_store(f"sqlite:///{db}")
    store.set_event_builder(events_for)
    # (model_copy does not validate: hand it SecretStr values as Settings would hold them)
    right = settings.model_copy(update={"secret_key": SecretStr(Fernet.generate_key().decode()),
                                        "event_retry_cap_s": 0.2})
    wrong = right.model_copy(update={"secret_key": SecretStr(Fernet.generate_key().decode())})
    sub = EventBus(store, right).create_subscription("hook", {}, {"type": "webhook", "url": rx.url})
    secret = sub.target["secret"]
    new_job(store, "job-a")
    assert secret.encode() not in _db_bytes(db)
    assert sub.target["url"].encode() in _db_bytes(db)  # (the check can see what is stored)

    with caplog.at_level(logging.ERROR, logger="murphy.events.dispatcher"):
        bus = EventBus(store, wrong)
        bus.start()
        time.sleep(0.8)  # several retry waits
        bus.close()
    assert rx.attempts == []
    assert caplog.text.count("sealed with another key") == 1  # said once, not every retry

    bus = EventBus(store, right)
    bus.start()
    try:
        events = rx.wait_for(1)
    finally:
        bus.close()
    assert [e["detail"]["TrainingJobName"] for e in events] == ["job-a"]
    assert verify_signature(secret, rx.attempts[0].body, rx.attempts[0].headers.get(SIGNATURE_HEADER))
    store.close()


def test_a_plain_text_secret_from_before_is_sealed_when_the_bus_starts(
        tmp_path: Path, settings: Settings, receiver_factory: Callable[..., Receiver]) -> None:
    from murphy.jobs.events import events_for
    from murphy.store.base import Subscription

    rx = receiver_factory()
    db = tmp_path / "jobs.db"
    store = open_job_store(f"sqlite:///{db}")
    store.set_event_builder(events_for)
    plain = "an-old-plain-secret-0123456789abcdef"
    store.create_subscription(Subscription("sub-old", "old", {}, {"type": "webhook", "url": rx.url, "secret": plain},
                                           1.0))
    assert plain.encode() in _db_bytes(db)
    bus = EventBus(store, settings)
    bus.start()
    try:
        stored = store.get_subscription("old").target["secret"]
        assert stored.startswith("fernet:v1:") and unseal(stored, settings) == plain
        new_job(store, "job-a")
        bus.wake()
        rx.wait_for(1)
    finally:
        bus.close()
    assert verify_signature(plain, rx.attempts[0].body, rx.attempts[0].headers.get(SIGNATURE_HEADER))
    store.close()
    # The old value is gone from the live database pages (SQLite may keep freed pages until VACUUM,
    # so look at what a reader gets rather than at the file).
    again = open_job_store(f"sqlite:///{db}")
    assert again.get_subscription("old").target["secret"] != plain
    again.close()
