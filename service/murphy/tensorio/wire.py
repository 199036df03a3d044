"""The few protobuf wire-format primitives the Event codec needs (no protobuf dependency).

Decoding is defensive: every malformed input raises :class:`CorruptRecord`, never IndexError or
struct.error, and unknown fields of every wire type (including deprecated groups) are skipped.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from murphy.exceptions import CorruptRecord

VARINT, FIXED64, LEN, START_GROUP, END_GROUP, FIXED32 = 0, 1, 2, 3, 4, 5
_MAX_GROUP_DEPTH = 64
_U64 = 1 << 64
_SMALL_VARINTS = tuple(bytes([i]) for i in range(128))
_F64 = struct.Struct("<d")


def encode_varint(value: int) -> bytes:
    """Base-128 varint; negative values are written as 64-bit two's complement (10 bytes)."""
    if 0 <= value < 128:
        return _SMALL_VARINTS[value]
    if value < 0:
        value += _U64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@lru_cache(maxsize=256)
def key(field: int, wire_type: int) -> bytes:
    """The tag bytes of a field (cached: a handful of tags are written for every record)."""
    return encode_varint((field << 3) | wire_type)


def len_delimited(field: int, data: bytes) -> bytes:
    """A complete length-delimited field."""
    return b"".join((key(field, LEN), encode_varint(len(data)), data))


def fixed64_double(field: int, value: float) -> bytes:
    """A complete ``double`` field."""
    return key(field, FIXED64) + _F64.pack(value)


def decode_varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    """``(value, new_pos)``; raises :class:`CorruptRecord` if the varint runs past ``end``."""
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise CorruptRecord("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & (_U64 - 1), pos
        shift += 7
        if shift >= 70:
            raise CorruptRecord("varint longer than 10 bytes")


def to_int64(value: int) -> int:
    """Reinterpret an unsigned varint as a signed int64."""
    return value - _U64 if value >= 1 << 63 else value


def read_double(buf: memoryview, pos: int) -> float:
    """The little-endian double at ``pos`` (bounds checked by :func:`iter_fields`)."""
    return float(_F64.unpack_from(buf, pos)[0])


def iter_fields(buf: memoryview, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """The fields of the message in ``buf[start:end]`` as ``(field, wire_type, a, b)`` tuples.

    VARINT: ``a`` is the value. FIXED64/FIXED32: ``a`` is the offset of the value. LEN: ``a:b`` is
    the payload range. Groups are skipped (not returned).

    This is the trial's hot loop (one call per message level per record), so one-byte varints,
    which are nearly all tags and lengths, are decoded inline and a list is built instead of
    running a generator.
    """
    out: list[tuple[int, int, int, int]] = []
    append = out.append
    pos = start
    while pos < end:
        tag = buf[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = decode_varint(buf, pos, end)
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise CorruptRecord("field number 0")
        if wire == LEN:
            if pos < end and buf[pos] < 0x80:
                length = buf[pos]
                pos += 1
            else:
                length, pos = decode_varint(buf, pos, end)
            if length > end - pos:
                raise CorruptRecord("length-delimited field runs past its message")
            append((field, wire, pos, pos + length))
            pos += length
        elif wire == VARINT:
            if pos < end and buf[pos] < 0x80:
                append((field, wire, buf[pos], pos + 1))
                pos += 1
            else:
                value, pos = decode_varint(buf, pos, end)
                append((field, wire, value, pos))
        elif wire in (FIXED64, FIXED32):
            size = 8 if wire == FIXED64 else 4
            if pos + size > end:
                raise CorruptRecord("truncated fixed-width field")
            append((field, wire, pos, pos + size))
            pos += size
        elif wire == START_GROUP:
            pos = _skip_group(buf, pos, end, field, 1)
        else:
            raise CorruptRecord(f"invalid wire type {wire}")
    return out


def _skip_group(buf: memoryview, pos: int, end: int, group_field: int, depth: int) -> int:
    if depth > _MAX_GROUP_DEPTH:
        raise CorruptRecord("groups nested too deeply")
    while pos < end:
        tag, pos = decode_varint(buf, pos, end)
        field, wire = tag >> 3, tag & 7
        if wire == END_GROUP:
            if field != group_field:
                raise CorruptRecord("mismatched end-group tag")
            return pos
        if wire == VARINT:
            _, pos = decode_varint(buf, pos, end)
        elif wire == FIXED64:
            pos += 8
        elif wire == FIXED32:
            pos += 4
        elif wire == LEN:
            length, pos = decode_varint(buf, pos, end)
            pos += length
        elif wire == START_GROUP:
            pos = _skip_group(buf, pos, end, field, depth + 1)
        else:
            raise CorruptRecord(f"invalid wire type {wire}")
        if pos > end:
            raise CorruptRecord("group field runs past its message")
    raise CorruptRecord("unterminated group")


def decode_utf8(buf: memoryview, start: int, end: int, what: str) -> str:
    """UTF-8 text of a LEN field; raises :class:`CorruptRecord` for invalid bytes."""
    try:
        return bytes(buf[start:end]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptRecord(f"{what} is not valid UTF-8") from exc
