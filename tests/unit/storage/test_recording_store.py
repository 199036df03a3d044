"""murphy.storage.recording: the recording fake passes every call through and records it."""

from __future__ import annotations

from collections import Counter

import pytest

from murphy.exceptions import ObjectNotFound
from murphy.storage import InMemoryObjectStore, ObjectStore
from murphy.storage.recording import Call, RecordingObjectStore


def test_every_request_is_passed_through_recorded_and_counted() -> None:
    inner = InMemoryObjectStore()
    rec = RecordingObjectStore(inner)
    assert isinstance(rec, ObjectStore) and rec.uri == f"recording://{inner.uri}"
    rec.put("a/1", b"hello")
    rec.put("a/2", b"xy")
    assert inner.get("a/1") == b"hello"  # written through
    assert rec.get("a/1", 1, 3) == b"ell" and rec.get("a/2") == b"xy"
    assert list(rec.list("a/", start_after="a/1")) == ["a/2"]
    assert rec.exists("a/2") and not rec.exists("b")
    rec.delete("a/2")
    assert not inner.exists("a/2")
    with pytest.raises(ObjectNotFound):
        rec.get("a/2")  # the inner store's error, recorded like any get
    assert rec.log == [
        Call("put", ("a/1", 5)), Call("put", ("a/2", 2)), Call("get", ("a/1", 1, 3)), Call("get", ("a/2", 0, None)),
        Call("list", ("a/", "a/1")), Call("exists", ("a/2",)), Call("exists", ("b",)), Call("delete", ("a/2",)),
        Call("get", ("a/2", 0, None)),
    ]
    assert rec.calls == Counter(put=2, get=3, list=1, exists=2, delete=1)
    assert rec.gets == [("a/1", 1, 3), ("a/2", 0, None), ("a/2", 0, None)] and rec.puts == ["a/1", "a/2"]


def test_a_child_records_into_the_same_lists_and_clear_forgets() -> None:
    inner = InMemoryObjectStore()
    rec = RecordingObjectStore(inner, uri_scheme="counting")
    sub = rec.child("run")
    assert isinstance(sub, RecordingObjectStore) and sub.uri.startswith("counting://")
    sub.put("k", b"v")
    assert inner.get("run/k") == b"v"
    assert rec.get("run/k") == b"v" and sub.get("k") == b"v"
    assert rec.log == [Call("put", ("k", 1)), Call("get", ("run/k", 0, None)), Call("get", ("k", 0, None))]
    assert rec.calls == Counter(put=1, get=2) and sub.calls is rec.calls
    rec.clear()
    assert not rec.log and not sub.log and not rec.calls and not rec.gets and not rec.puts
