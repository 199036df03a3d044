from __future__ import annotations

import struct

import pytest

from murphy.exceptions import CorruptRecord, TruncatedRecord
from murphy.tensorio.crc32c import crc32c, mask, masked_crc32c
from murphy.tensorio.framing import (
    MAGIC_FOOTER,
    frame,
    frame_parts,
    iter_records,
    iter_records_with_offsets,
    read_one,
)


def test_crc32c_known_vectors() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4
    assert masked_crc32c(b"0x12345678") == MAGIC_FOOTER == 0x062DC0B3


def test_frame_layout() -> None:
    rec = frame(b"hello")
    assert rec[:8] == struct.pack("<Q", 5)
    assert rec[8:12] == struct.pack("<I", masked_crc32c(struct.pack("<Q", 5)))
    assert rec[12:17] == b"hello"
    assert rec[17:] == b"\xb3\xc0\x2d\x06"
    parts, length = frame_parts([b"he", memoryview(b"llo")])
    assert b"".join(parts) == rec and length == len(rec)


def test_read_one_accepts_magic_and_real_crc() -> None:
    assert bytes(read_one(frame(b"abc"))) == b"abc"
    real = frame(b"abc")[:-4] + struct.pack("<I", mask(crc32c(b"abc")))
    assert bytes(read_one(real)) == b"abc"
    assert bytes(read_one(bytearray(frame(b"")))) == b""


def test_bad_footer_and_bad_length_crc_are_corrupt() -> None:
    rec = bytearray(frame(b"abc"))
    rec[-1] ^= 1
    with pytest.raises(CorruptRecord):
        read_one(bytes(rec))
    rec = bytearray(frame(b"abc"))
    rec[9] ^= 1
    with pytest.raises(CorruptRecord):
        read_one(bytes(rec))
    rec = bytearray(frame(b"abc"))
    rec[0] = 4  # length changed, crc no longer matches
    with pytest.raises(CorruptRecord):
        read_one(bytes(rec))


def test_truncation_and_trailing_bytes() -> None:
    rec = frame(b"abcdef")
    for cut in range(len(rec)):
        with pytest.raises(TruncatedRecord):
            read_one(rec[:cut])
    with pytest.raises(CorruptRecord):
        read_one(rec + b"x")


def test_iter_records_stops_silently_at_a_truncated_tail() -> None:
    data = frame(b"a") + frame(b"bb") + frame(b"ccc")
    assert [bytes(p) for p in iter_records(data)] == [b"a", b"bb", b"ccc"]
    for cut in range(len(data) - 19, len(data)):
        assert [bytes(p) for p in iter_records(data[:cut])] == [b"a", b"bb"]
    offsets = [(s, n) for s, n, _ in iter_records_with_offsets(data)]
    assert offsets == [(0, 17), (17, 18), (35, 19)]


def test_iter_records_raises_on_damage_in_the_middle() -> None:
    data = bytearray(frame(b"a") + frame(b"bb"))
    data[17 + 13] ^= 0xFF  # payload of record 2 (footer is magic: payload damage is invisible)
    assert len(list(iter_records(bytes(data)))) == 2
    data[-2] ^= 0xFF  # footer of record 2
    with pytest.raises(CorruptRecord):
        list(iter_records(bytes(data)))
