"""CRC-32C (Castagnoli) and TFRecord's masked CRC.

Pure Python (a 256-entry table), so murphy needs no compiled dependency. If the ``crc32c``
package happens to be importable it is used for speed; it is never required. Writers only CRC the
8-byte length field (the payload footer is smdebug's constant), so the slow path matters only
when reading records that carry real payload CRCs.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

_POLY = 0x82F63B78  # CRC-32C, reflected
_MASK_DELTA = 0xA282EAD8


@functools.cache
def _table() -> tuple[int, ...]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


def _crc32c_py(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    table = _table()
    c = crc ^ 0xFFFFFFFF
    for b in bytes(data):
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


@functools.cache
def _native() -> Callable[[bytes], int] | None:
    # Looked up lazily (not at import) and only used when already installed.
    try:
        mod = importlib.import_module("crc32c")
    except ImportError:
        return None
    fn = getattr(mod, "crc32c", None)
    if not callable(fn):
        return None
    try:
        if fn(b"123456789") != 0xE3069283:
            return None
    except Exception:  # a broken native module must not break reading
        return None
    return fn  # type: ignore[no-any-return]


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """The CRC-32C of ``data``."""
    native = _native()
    if native is not None:
        return int(native(bytes(data)))
    return _crc32c_py(data)


def mask(crc: int) -> int:
    """TFRecord's CRC masking: rotate right by 15 bits and add a constant."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """``mask(crc32c(data))``, the checksum TFRecord stores."""
    return mask(crc32c(data))
