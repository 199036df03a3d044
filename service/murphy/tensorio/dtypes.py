"""numpy dtypes ↔ TensorFlow ``DataType`` numbers, as smdebug writes them.

Every numeric dtype smdebug can write is written with its own ``DT_*`` number (spec §b) and read
back exactly, including the ones smdebug 1.0.34 itself reads wrongly (int8 as uint8) or not at
all (int16, uint16, uint32, uint64, complex64). bfloat16 has no numpy dtype: it is widened to
float32 (exact) and tagged, see :mod:`murphy.tensorio.events`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from murphy.exceptions import UnsupportedDType

DT_INVALID = 0
DT_FLOAT = 1
DT_DOUBLE = 2
DT_INT32 = 3
DT_UINT8 = 4
DT_INT16 = 5
DT_INT8 = 6
DT_STRING = 7
DT_COMPLEX64 = 8
DT_INT64 = 9
DT_BOOL = 10
DT_BFLOAT16 = 14
DT_UINT16 = 17
DT_COMPLEX128 = 18
DT_HALF = 19
DT_UINT32 = 22
DT_UINT64 = 23

BFLOAT16 = "bfloat16"

# Always little-endian on disk (smdebug wrote native order, i.e. little-endian on x86).
_NUMPY_TO_DT: dict[np.dtype[Any], int] = {
    np.dtype("<f2"): DT_HALF,
    np.dtype("<f4"): DT_FLOAT,
    np.dtype("<f8"): DT_DOUBLE,
    np.dtype("i1"): DT_INT8,
    np.dtype("<i2"): DT_INT16,
    np.dtype("<i4"): DT_INT32,
    np.dtype("<i8"): DT_INT64,
    np.dtype("u1"): DT_UINT8,
    np.dtype("<u2"): DT_UINT16,
    np.dtype("<u4"): DT_UINT32,
    np.dtype("<u8"): DT_UINT64,
    np.dtype("?"): DT_BOOL,
    np.dtype("<c8"): DT_COMPLEX64,
    np.dtype("<c16"): DT_COMPLEX128,
}
_DT_TO_NUMPY: dict[int, np.dtype[Any]] = {dt: npd for npd, dt in _NUMPY_TO_DT.items()}


def little_endian(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """``dtype`` in little-endian byte order (unchanged for 1-byte and byte-order-free types)."""
    return dtype.newbyteorder("<") if dtype.byteorder not in ("|", "<") else dtype


def is_string_dtype(dtype: np.dtype[Any]) -> bool:
    """True for numpy str/bytes dtypes (object arrays are checked element-wise by the encoder)."""
    return dtype.kind in ("U", "S")


def is_bfloat16_dtype(dtype: np.dtype[Any]) -> bool:
    """True for a 2-byte numpy extension dtype named bfloat16 (e.g. ``ml_dtypes.bfloat16``)."""
    # dtype.type.__name__ rather than dtype.name: the latter is computed in Python and this
    # runs for every record written.
    return dtype.itemsize == 2 and dtype.type.__name__ == BFLOAT16


def dt_of(dtype: np.dtype[Any]) -> int:
    """The ``DT_*`` number for a numeric numpy dtype; raises :class:`UnsupportedDType`."""
    dt = _NUMPY_TO_DT.get(little_endian(dtype))
    if dt is None:
        raise UnsupportedDType(f"dtype {dtype} cannot be written as a TensorProto")
    return dt


def numpy_dtype_of(dt: int) -> np.dtype[Any]:
    """The little-endian numpy dtype for a numeric ``DT_*`` number; raises :class:`UnsupportedDType`."""
    npd = _DT_TO_NUMPY.get(dt)
    if npd is None:
        raise UnsupportedDType(f"TensorProto dtype {dt} has no numeric numpy equivalent")
    return npd


def bfloat16_bits_to_float32(bits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Widen bfloat16 bit patterns (a uint16 array) to float32: exact, bfloat16 is float32's top half."""
    widened: np.ndarray[Any, Any] = bits.astype("<u4") << np.uint32(16)
    return widened.view("<f4")


def make_numpy_array(x: Any) -> np.ndarray[Any, Any]:
    """Turn what a hook was given into an ndarray the way smdebug does.

    ndarrays pass through; Python and numpy scalars (and strings) become shape ``[1]``; lists and
    tuples go through ``np.asarray``. Anything else raises :class:`UnsupportedDType`.
    """
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (bool, int, float, complex, str, bytes, np.generic)):
        return np.array([x])
    if isinstance(x, (list, tuple)):
        return np.asarray(x)
    raise UnsupportedDType(f"cannot save a value of type {type(x).__name__}")
