"""TensorProto's typed ``*_val`` fields, which TensorFlow uses instead of ``tensor_content`` for
small or constant tensors. smdebug never writes them; murphy reads them so TF-written records
decode too. A value list shorter than the shape is padded with its last value (TF semantics).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from murphy.exceptions import CorruptRecord
from murphy.tensorio import dtypes as d
from murphy.tensorio import wire as w

# A tensor built from fewer values than its shape (or from none: zeros) is expanded in memory;
# cap it so a garbage shape cannot ask for terabytes.
MAX_EXPANDED_ELEMENTS = 1 << 26

# dtype → (field number, fixed-width numpy dtype or None for varint values, values per element)
_FIELDS: dict[int, tuple[int, str | None, int]] = {
    d.DT_FLOAT: (5, "<f4", 1),
    d.DT_DOUBLE: (6, "<f8", 1),
    d.DT_INT32: (7, None, 1),
    d.DT_INT16: (7, None, 1),
    d.DT_INT8: (7, None, 1),
    d.DT_UINT8: (7, None, 1),
    d.DT_UINT16: (7, None, 1),
    d.DT_INT64: (10, None, 1),
    d.DT_BOOL: (11, None, 1),
    d.DT_HALF: (13, None, 1),
    d.DT_BFLOAT16: (13, None, 1),
    d.DT_COMPLEX64: (9, "<f4", 2),
    d.DT_COMPLEX128: (12, "<f8", 2),
    d.DT_UINT32: (16, None, 1),
    d.DT_UINT64: (17, None, 1),
}


def _varints(buf: memoryview, fields: Sequence[tuple[int, int, int, int]], number: int) -> list[int]:
    out: list[int] = []
    for field, wt, a, b in fields:
        if field != number:
            continue
        if wt == w.VARINT:
            out.append(a)
        elif wt == w.LEN:  # packed
            pos = a
            while pos < b:
                value, pos = w.decode_varint(buf, pos, b)
                out.append(value)
    return out


def _fixed(buf: memoryview, fields: Sequence[tuple[int, int, int, int]], number: int, fmt: str) -> np.ndarray[Any, Any]:
    size = np.dtype(fmt).itemsize
    chunks: list[bytes] = []
    for field, wt, a, b in fields:
        if field != number:
            continue
        if wt in (w.FIXED32, w.FIXED64) and b - a == size:
            chunks.append(bytes(buf[a:b]))
        elif wt == w.LEN:  # packed
            if (b - a) % size:
                raise CorruptRecord("packed fixed-width values have a partial element")
            chunks.append(bytes(buf[a:b]))
    return np.frombuffer(b"".join(chunks), dtype=fmt)


def _from_varints(values: list[int], dt: int, np_dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    if dt == d.DT_BOOL:
        return np.array([v != 0 for v in values], dtype=bool)
    if dt in (d.DT_HALF, d.DT_BFLOAT16):
        return np.array([v & 0xFFFF for v in values], dtype="<u2").view(np_dtype)
    if dt in (d.DT_UINT32, d.DT_UINT64):
        return np.array(values, dtype=np.uint64).astype(np_dtype)
    # int32-family varints are sign-extended to 64 bits on the wire
    signed = [v - (1 << 64) if v >= 1 << 63 else v for v in values]
    return np.array(signed, dtype=np.int64).astype(np_dtype)


def typed_values(
    buf: memoryview,
    fields: Sequence[tuple[int, int, int, int]],
    dt: int,
    np_dtype: np.dtype[Any],
    count: int,
) -> np.ndarray[Any, Any]:
    """A flat array of ``count`` elements from the typed value fields among ``fields``."""
    number, fmt, per = _FIELDS.get(dt, (0, None, 1))
    if fmt is not None:
        flat = _fixed(buf, fields, number, fmt)
        values = flat.view(np_dtype) if per == 2 else flat.astype(np_dtype)
    elif number:
        values = _from_varints(_varints(buf, fields, number), dt, np_dtype)
    else:
        values = np.zeros(0, dtype=np_dtype)
    n = len(values)
    if n == count:
        copied: np.ndarray[Any, Any] = values.copy()
        return copied
    if n > count:
        raise CorruptRecord(f"tensor has {n} values, its shape holds {count}")
    if count > MAX_EXPANDED_ELEMENTS:
        raise CorruptRecord(f"tensor of {count} elements has only {n} values stored")
    out = np.zeros(count, dtype=np_dtype)
    if n:
        out[:n] = values
        out[n:] = values[-1]
    return out
