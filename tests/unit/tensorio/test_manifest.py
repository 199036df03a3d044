"""The step manifest's format and writer (murphy.tensorio.manifest)."""

from __future__ import annotations

import logging
import struct
import zlib

import pytest

from murphy.storage import InMemoryObjectStore
from murphy.tensorio.locations import index_file_key
from murphy.tensorio.manifest import (
    MANIFEST_PREFIX,
    CorruptSegment,
    ManifestWriter,
    decode_segment,
    encode_segment,
    index_key_worker,
    parse_segment_key,
    segment_key,
)


def _entries(n: int, worker: str = "worker_0", first: int = 0) -> list[tuple[str, int, bytes]]:
    return [(index_file_key(s, worker), s, f'{{"step": {s}, "pad": "{"x" * (s % 7)}"}}'.encode()) for s in range(first, first + n)]


def test_round_trip_keeps_every_file_byte_for_byte() -> None:
    entries = _entries(100)
    got = decode_segment(encode_segment("worker_0", entries))
    assert got == {k: d for k, _, d in entries}


def test_segment_names_round_trip_and_escape_device_workers() -> None:
    key = segment_key("/job:worker/replica:0/task:1/device:CPU:0", 1200, 1299)
    name = parse_segment_key(key)
    assert name is not None and (name.first_step, name.last_step) == (1200, 1299)
    # Spelled as the index files spell that worker, so the reader can match them up.
    idx = index_file_key(1234, "/job:worker/replica:0/task:1/device:CPU:0")
    assert index_key_worker(idx) == name.worker
    assert key.startswith(MANIFEST_PREFIX) and not key.startswith(("index/", "events/", "collections/"))
    assert parse_segment_key("index/000000000/000000000001_worker_0.json") is None
    assert parse_segment_key(MANIFEST_PREFIX + "worker_0/notes.txt") is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # torn upload
        lambda b: b[:-1],
        lambda b: b[:20] + bytes([b[20] ^ 0xFF]) + b[21:],  # a flipped bit in the header
        lambda b: b"NOTMAGIC" + b[8:],
        lambda b: b"",
    ],
    ids=["half", "last-byte", "flipped", "magic", "empty"],
)
def test_damage_is_detected(damage: object) -> None:
    data = encode_segment("worker_0", _entries(10))
    with pytest.raises(CorruptSegment):
        decode_segment(damage(data))  # type: ignore[operator]


def test_an_entry_that_disagrees_with_its_checksum_is_detected_even_with_a_valid_outer_crc() -> None:
    """A segment re-sealed after an entry changed (a bug, not a tear) still does not decode."""
    entries = _entries(3)
    data = bytearray(encode_segment("worker_0", entries))
    head_len = struct.unpack_from("<I", data, 8)[0]
    payload = zlib.decompress(bytes(data[12 + head_len : -4]))
    forged = bytes(data[: 12 + head_len]) + zlib.compress(payload.replace(b'"step": 1', b'"step": 9'), 1)
    forged += struct.pack("<I", zlib.crc32(forged))
    with pytest.raises(CorruptSegment, match="checksum"):
        decode_segment(forged)


def test_writer_puts_a_segment_every_n_files_and_the_tail_on_flush() -> None:
    store = InMemoryObjectStore()
    w = ManifestWriter(store, "worker_0", segment_files=100)
    w.begin()
    for key, step, data in _entries(250):
        w.add(key, step, data)
    assert sorted(store.list(MANIFEST_PREFIX)) == [segment_key("worker_0", 0, 99), segment_key("worker_0", 100, 199)]
    w.flush()
    keys = sorted(store.list(MANIFEST_PREFIX))
    assert keys[-1] == segment_key("worker_0", 200, 249)
    held: dict[str, bytes] = {}
    for k in keys:
        held.update(decode_segment(store.get(k)))
    assert held == {k: d for k, _, d in _entries(250)}


def test_begin_removes_this_workers_stale_segments_only() -> None:
    store = InMemoryObjectStore()
    store.put(segment_key("worker_0", 0, 99), b"stale")
    store.put(segment_key("worker_1", 0, 99), b"theirs")
    ManifestWriter(store, "worker_0").begin()
    assert list(store.list(MANIFEST_PREFIX)) == [segment_key("worker_1", 0, 99)]


class _FailingPuts(InMemoryObjectStore):
    def put(self, key: str, data: bytes) -> None:
        if key.startswith(MANIFEST_PREFIX):
            raise OSError("disk full")
        super().put(key, data)


def test_a_failing_store_turns_the_manifest_off_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    w = ManifestWriter(_FailingPuts(), "worker_0", segment_files=2)
    with caplog.at_level(logging.WARNING):
        for key, step, data in _entries(10):
            w.add(key, step, data)  # never raises
        w.flush()
    assert not w.enabled and w.segments_written == 0
    assert sum("step manifest disabled" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("files", [1, 10, 100, 1000])
def test_a_short_segment_is_deflated_with_a_window_no_larger_than_it_needs(files: int) -> None:
    # zlib's default state (~256 KiB) costs a short segment (an XGBoost run's ten index files) more
    # in fresh pages than its compression; any inflater reads a smaller window.
    entries = _entries(files)
    data = encode_segment("worker_0", entries)
    assert decode_segment(data) == {k: d for k, _, d in entries}
    payload = b"".join(d for _, _, d in entries)
    (head_len,) = struct.unpack_from("<I", data, 8)
    stream = data[12 + head_len : -4]
    window = 1 << ((stream[0] >> 4) + 8)  # the zlib header's CINFO
    assert window >= min(len(payload), 1 << 15)
    if len(payload) < 1 << 14:
        assert window < 1 << 15
    else:
        assert stream == zlib.compress(payload, 1)  # zlib's defaults: the bytes are unchanged
