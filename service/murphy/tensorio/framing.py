"""TFRecord framing, as smdebug writes it.

Each record is ``uint64 len | uint32 masked_crc32c(len bytes) | payload | uint32 footer``, all
little-endian. smdebug writes the constant footer ``masked_crc32c(b"0x12345678")`` (0x062dc0b3)
instead of the payload's CRC, and its reader insists on it, so :func:`frame` writes that
constant. Readers here accept the constant *or* the real masked CRC32C of the payload, so
TensorFlow-written records read too.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator, Sequence

from murphy.exceptions import CorruptRecord, TruncatedRecord
from murphy.tensorio.crc32c import masked_crc32c

Buffer = bytes | bytearray | memoryview

MAGIC_FOOTER = 0x062DC0B3
MAGIC_FOOTER_BYTES = struct.pack("<I", MAGIC_FOOTER)
HEADER_SIZE = 12
FOOTER_SIZE = 4
OVERHEAD = HEADER_SIZE + FOOTER_SIZE
_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")


@functools.lru_cache(maxsize=8192)
def _header(length: int) -> bytes:
    # Tensors of one model repeat a few sizes, so the length CRC is worth caching.
    return _HEADER.pack(length, masked_crc32c(struct.pack("<Q", length)))


def frame_parts(payload_parts: Sequence[Buffer]) -> tuple[list[Buffer], int]:
    """Frame a payload given as pieces; returns ``(pieces, total_length)`` without joining.

    Lets a writer join a whole file's records with a single copy.
    """
    length = sum(len(p) for p in payload_parts)
    return [_header(length), *payload_parts, MAGIC_FOOTER_BYTES], length + OVERHEAD


def frame(payload: Buffer) -> bytes:
    """One framed record with smdebug's magic footer."""
    return b"".join((_header(len(payload)), payload, MAGIC_FOOTER_BYTES))


def as_byte_view(buf: Buffer) -> memoryview:
    """A flat unsigned-byte memoryview of ``buf`` (no copy)."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _read_at(buf: memoryview, offset: int) -> tuple[memoryview, int]:
    """Parse the record at ``offset``; returns (payload, end offset)."""
    avail = len(buf) - offset
    if avail < HEADER_SIZE:
        raise TruncatedRecord(f"record header at offset {offset} is cut short ({avail} of 12 bytes)")
    length, len_crc = _HEADER.unpack_from(buf, offset)
    if masked_crc32c(buf[offset : offset + 8]) != len_crc:
        raise CorruptRecord(f"record at offset {offset}: length checksum mismatch")
    end = offset + HEADER_SIZE + length + FOOTER_SIZE
    if end > len(buf):
        raise TruncatedRecord(
            f"record at offset {offset} declares {length} payload bytes, only "
            f"{max(0, avail - HEADER_SIZE)} present"
        )
    payload = buf[offset + HEADER_SIZE : end - FOOTER_SIZE]
    (footer,) = _U32.unpack_from(buf, end - FOOTER_SIZE)
    if footer != MAGIC_FOOTER and footer != masked_crc32c(payload):
        raise CorruptRecord(f"record at offset {offset}: payload checksum mismatch")
    return payload, end


def read_one(buf: Buffer) -> memoryview:
    """The payload of the single record ``buf`` holds.

    Raises :class:`TruncatedRecord` if ``buf`` ends early and :class:`CorruptRecord` for bad
    checksums or bytes after the record (a wrong index range).
    """
    view = as_byte_view(buf)
    payload, end = _read_at(view, 0)
    if end != len(view):
        raise CorruptRecord(f"{len(view) - end} unexpected bytes after the record")
    return payload


def iter_records(buf: Buffer) -> Iterator[memoryview]:
    """Yield the payload of every record in ``buf``, in order.

    Stops silently at a truncated last record (a write in progress); raises
    :class:`CorruptRecord` on damage.
    """
    for _, _, payload in iter_records_with_offsets(buf):
        yield payload


def iter_records_with_offsets(buf: Buffer) -> Iterator[tuple[int, int, memoryview]]:
    """Like :func:`iter_records`, yielding ``(start, framed_length, payload)``."""
    view = as_byte_view(buf)
    offset = 0
    while offset < len(view):
        try:
            payload, end = _read_at(view, offset)
        except TruncatedRecord:
            return
        yield offset, end - offset, payload
        offset = end
