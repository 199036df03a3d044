"""Encode and decode smdebug's tensor ``Event`` records (a hand-written protobuf codec).

One record holds one tensor::

    Event { wall_time(1): double; step(2): int64 = global step;
      summary(5) { value(1) { tag(1) = name;
        tensor(8) TensorProto { dtype(1); tensor_shape(2) { dim(2) { size(1); name(2) } };
                                tensor_content(4) | string_val(8)... };
        metadata(9) { plugin_data(1) { plugin_name(1); content(2) } ... } } } }

Fields are written in field-number order, as protobuf serializers do. plugin_data holds
``mode_step`` then ``mode`` ("1".."4"); a bfloat16 tensor is stored as DT_FLOAT with a third entry
``{plugin_name: "murphy_dtype", content: "bfloat16"}`` (smdebug's reader skips unknown plugin
names). The decoder also reads TensorFlow-written tensors (typed ``*_val`` fields, DT_STRING,
DT_BFLOAT16) and skips every field it does not know.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from murphy.core.modes import ModeKeys
from murphy.exceptions import CorruptRecord, UnsupportedDType
from murphy.tensorio import dtypes as d
from murphy.tensorio import wire as w
from murphy.tensorio.framing import Buffer, as_byte_view
from murphy.tensorio.tensor_values import typed_values

MODE_STEP_PLUGIN_NAME = "mode_step"
MODE_PLUGIN_NAME = "mode"
DTYPE_PLUGIN_NAME = "murphy_dtype"


@dataclass
class TensorEvent:
    """One decoded tensor record.

    ``value`` is a writeable ndarray in native byte order; ``original_dtype`` is ``"bfloat16"``
    for tensors stored widened to float32, else None.
    """

    name: str
    value: np.ndarray[Any, Any]
    step: int
    mode: ModeKeys
    mode_step: int
    wall_time: float
    original_dtype: str | None = None


# --- encoding ------------------------------------------------------------------------------


def _prepare(value: Any, original_dtype: str | None) -> tuple[np.ndarray[Any, Any], str | None]:
    """The array to write and the original dtype to record (bfloat16 widening, byte order)."""
    arr = d.make_numpy_array(value)
    if d.is_bfloat16_dtype(arr.dtype):
        return d.bfloat16_bits_to_float32(arr.view(np.uint16)), d.BFLOAT16
    if original_dtype is not None and original_dtype != arr.dtype.name:
        if original_dtype != d.BFLOAT16:
            raise UnsupportedDType(f"original_dtype {original_dtype!r} is not supported (only bfloat16)")
        if arr.dtype == np.uint16:  # bit patterns from the hook
            return d.bfloat16_bits_to_float32(arr), d.BFLOAT16
        return np.asarray(arr, dtype=np.float32), d.BFLOAT16
    return arr, None


@lru_cache(maxsize=4096)
def _shape_field(name: str, shape: tuple[int, ...]) -> bytes:
    # Cached: the hook writes the same (name, shape) at every saved step.
    dims = []
    for size in shape:
        dim = (w.key(1, w.VARINT) + w.encode_varint(size) if size else b"") + w.len_delimited(
            2, f"{name}_{size}".encode()
        )
        dims.append(w.len_delimited(2, dim))
    return w.len_delimited(2, b"".join(dims))


def _string_values(arr: np.ndarray[Any, Any]) -> list[bytes]:
    out = []
    for item in arr.reshape(-1).tolist():
        if isinstance(item, str):
            out.append(item.encode("utf-8"))
        elif isinstance(item, bytes):
            out.append(item)
        else:
            raise UnsupportedDType(f"object array element of type {type(item).__name__} is not a string")
    return out


def _string_parts(name: str, arr: np.ndarray[Any, Any]) -> tuple[bytes, bytes]:
    """A string tensor's TensorProto: the shape, and the values (dtype left unset, DT_INVALID, as
    smdebug writes strings)."""
    strings = b"".join(w.len_delimited(8, s) for s in _string_values(arr))
    return _shape_field(name, arr.shape), strings


def _content(arr: np.ndarray[Any, Any], copy: bool) -> Buffer:
    """The little-endian C-order bytes of a numeric array: a view when ``copy`` is False and the
    array already has that layout (the writer then writes straight from the array's memory)."""
    le = np.asarray(arr, dtype=d.little_endian(arr.dtype))
    if copy:
        return le.tobytes(order="C")
    if not le.flags.c_contiguous:
        le = np.ascontiguousarray(le)
    return memoryview(le.reshape(-1).view(np.uint8))  # type: ignore[arg-type]


@lru_cache(maxsize=4096)
def _value_static(name: str, shape: tuple[int, ...], dt: int, nbytes: int) -> bytes:
    """Summary.Value bytes from the tag up to the tensor content: the same at every step for one
    tensor, so built once (no per-record protobuf work but the few varints of the lengths)."""
    head = b"".join((w.key(1, w.VARINT), w.encode_varint(dt), _shape_field(name, shape), w.key(4, w.LEN),
                     w.encode_varint(nbytes)))
    tensor_len = len(head) + nbytes
    return b"".join((w.len_delimited(1, name.encode("utf-8")), w.key(8, w.LEN), w.encode_varint(tensor_len), head))


_WALL_TIME_TAG = w.key(1, w.FIXED64)
_STEP_TAG = w.key(2, w.VARINT)
_SUMMARY_TAG = w.key(5, w.LEN)
_VALUE_TAG = w.key(1, w.LEN)
_F64 = struct.Struct("<d")


def _plugin_entry(name: str, content: str) -> bytes:
    return w.len_delimited(1, w.len_delimited(1, name.encode()) + w.len_delimited(2, content.encode()))


@lru_cache(maxsize=16)
def _metadata_tail(mode: ModeKeys, original_dtype: str | None) -> bytes:
    """The plugin data after ``mode_step``: the same for every step of a mode."""
    tail = _plugin_entry(MODE_PLUGIN_NAME, str(ModeKeys(mode).value))
    return tail if original_dtype is None else tail + _plugin_entry(DTYPE_PLUGIN_NAME, original_dtype)


_MODE_STEP_NAME = w.len_delimited(1, MODE_STEP_PLUGIN_NAME.encode())


@lru_cache(maxsize=64)
def _metadata(mode: ModeKeys, mode_step: int, original_dtype: str | None) -> bytes:
    # Cached: every record of a step carries the same plugin data (mode_step, mode, dtype).
    step_entry = w.len_delimited(1, _MODE_STEP_NAME + w.len_delimited(2, str(mode_step).encode()))
    return w.len_delimited(9, step_entry + _metadata_tail(mode, original_dtype))


def encode_tensor_event_parts(
    name: str,
    value: Any,
    *,
    step: int,
    mode: ModeKeys,
    mode_step: int,
    wall_time: float | None = None,
    original_dtype: str | None = None,
    copy: bool = True,
) -> list[Buffer]:
    """The Event payload as ``[prefix, content, suffix]`` pieces (join them for the bytes).

    With ``copy=False`` the content piece may be a view of ``value``'s memory (no copy): the
    caller must keep the array unchanged until the pieces are written.

    ``value`` is an ndarray, a numpy/Python scalar (saved with shape ``[1]``) or a list. Passing
    ``original_dtype="bfloat16"`` with a uint16 array means "these are bfloat16 bit patterns".
    Raises :class:`UnsupportedDType` for dtypes with no TensorProto mapping.
    """
    if type(value) is float and original_dtype is None:
        # A Python float (an XGBoost metric, a saved scalar): the record make_numpy_array's
        # float64 array of shape [1] gives, without building that array.
        return _float_parts(name, value, step, mode, mode_step, wall_time)
    arr, orig = _prepare(value, original_dtype)
    suffix = _metadata(mode, mode_step, orig)
    content: Buffer
    if d.is_string_dtype(arr.dtype) or arr.dtype == object:
        shape, strings = _string_parts(name, arr)
        content = shape + strings
        static = w.len_delimited(1, name.encode("utf-8")) + w.key(8, w.LEN) + w.encode_varint(len(content))
    else:
        content = _content(arr, copy)
        static = _value_static(name, arr.shape, d.dt_of(arr.dtype), len(content))
    return _event_parts(static, content, suffix, step, wall_time)


def _event_parts(static: bytes, content: Buffer, suffix: bytes, step: int, wall_time: float | None) -> list[Buffer]:
    """The Event around one Summary.Value (``static`` + ``content`` + ``suffix``)."""
    value_len = len(static) + len(content) + len(suffix)
    summary_head = _VALUE_TAG + w.encode_varint(value_len)
    event_head = _WALL_TIME_TAG + _F64.pack(time.time() if wall_time is None else wall_time)
    if step:  # proto3 leaves default values out
        event_head += _STEP_TAG + w.encode_varint(step)
    event_head += _SUMMARY_TAG + w.encode_varint(len(summary_head) + value_len)
    return [b"".join((event_head, summary_head, static)), content, suffix]


_SCALAR_SHAPE = (1,)


def _float_parts(
    name: str, value: float, step: int, mode: ModeKeys, mode_step: int, wall_time: float | None
) -> list[Buffer]:
    """``encode_tensor_event_parts`` of ``np.array([value])`` (float64, shape [1])."""
    static = _value_static(name, _SCALAR_SHAPE, d.DT_DOUBLE, 8)
    return _event_parts(static, _F64.pack(value), _metadata(mode, mode_step, None), step, wall_time)


def encode_tensor_event(
    name: str,
    value: Any,
    *,
    step: int,
    mode: ModeKeys,
    mode_step: int,
    wall_time: float | None = None,
    original_dtype: str | None = None,
) -> bytes:
    """One tensor Event, serialized (the payload of one TFRecord)."""
    return b"".join(
        encode_tensor_event_parts(
            name, value, step=step, mode=mode, mode_step=mode_step, wall_time=wall_time,
            original_dtype=original_dtype,
        )
    )


# --- decoding ------------------------------------------------------------------------------


def decode_events(payload: Buffer) -> list[TensorEvent]:
    """Every tensor in one Event record (none for records without a tensor summary).

    Numeric values are copied out of read-only buffers (``bytes``); given a writeable buffer
    (``bytearray``) they are zero-copy views into it.
    """
    buf = as_byte_view(payload)
    wall_time, step, summaries = 0.0, 0, []
    for field, wt, a, b in w.iter_fields(buf, 0, len(buf)):
        if field == 1 and wt == w.FIXED64:
            wall_time = w.read_double(buf, a)
        elif field == 2 and wt == w.VARINT:
            step = w.to_int64(a)
        elif field == 5 and wt == w.LEN:
            summaries.append((a, b))
    out = []
    for s_start, s_end in summaries:
        for field, wt, a, b in w.iter_fields(buf, s_start, s_end):
            if field == 1 and wt == w.LEN:
                event = _decode_value(buf, a, b, step, wall_time)
                if event is not None:
                    out.append(event)
    return out


def decode_tensor_event(payload: Buffer) -> TensorEvent:
    """The tensor in one Event record; raises :class:`CorruptRecord` if it holds none."""
    events = decode_events(payload)
    if not events:
        raise CorruptRecord("record holds no tensor")
    return events[0]


def _decode_value(buf: memoryview, start: int, end: int, step: int, wall_time: float) -> TensorEvent | None:
    name, tensor, plugins = "", None, []
    for field, wt, a, b in w.iter_fields(buf, start, end):
        if wt != w.LEN:
            continue
        if field == 1:
            name = w.decode_utf8(buf, a, b, "tensor name")
        elif field == 8:
            tensor = (a, b)
        elif field == 9:
            plugins.extend(plugin_data(buf, a, b))
    if tensor is None:
        return None
    mode, plugin_step, orig = plugin_meta(plugins, name)
    mode_step = step if plugin_step is None else plugin_step
    value, tf_orig = _decode_tensor(buf, tensor[0], tensor[1])
    orig = orig or tf_orig
    return TensorEvent(name, value, step, mode, mode_step, wall_time, orig)


def plugin_meta(plugins: list[tuple[str, str]], name: str) -> tuple[ModeKeys, int | None, str | None]:
    """``(mode, mode_step or None if absent, original dtype)`` from a value's plugin data."""
    mode, mode_step, orig = ModeKeys.GLOBAL, None, None
    for plugin_name, content in plugins:
        try:
            if plugin_name == MODE_STEP_PLUGIN_NAME:
                mode_step = int(content)
            elif plugin_name == MODE_PLUGIN_NAME:
                mode = ModeKeys(int(content))
            elif plugin_name == DTYPE_PLUGIN_NAME:
                orig = content
        except ValueError as exc:
            raise CorruptRecord(f"tensor {name!r}: bad {plugin_name} plugin data {content!r}") from exc
    return mode, mode_step, orig


def plugin_data(buf: memoryview, start: int, end: int) -> list[tuple[str, str]]:
    """``(plugin_name, content)`` of every plugin_data entry of a SummaryMetadata message."""
    out = []
    for field, wt, a, b in w.iter_fields(buf, start, end):
        if field != 1 or wt != w.LEN:
            continue
        name = content = ""
        for f2, wt2, a2, b2 in w.iter_fields(buf, a, b):
            if wt2 == w.LEN and f2 == 1:
                name = w.decode_utf8(buf, a2, b2, "plugin name")
            elif wt2 == w.LEN and f2 == 2:
                content = w.decode_utf8(buf, a2, b2, "plugin content")
        out.append((name, content))
    return out


def _decode_shape(buf: memoryview, start: int, end: int) -> list[int]:
    shape = []
    for field, wt, a, b in w.iter_fields(buf, start, end):
        if field == 3 and wt == w.VARINT and a:
            raise CorruptRecord("tensor of unknown rank")
        if field != 2 or wt != w.LEN:
            continue
        size = 0
        for f2, wt2, v, _ in w.iter_fields(buf, a, b):
            if f2 == 1 and wt2 == w.VARINT:
                size = w.to_int64(v)
        if size < 0:
            raise CorruptRecord(f"negative tensor dimension {size}")
        shape.append(size)
    return shape


def _decode_tensor(buf: memoryview, start: int, end: int) -> tuple[np.ndarray[Any, Any], str | None]:
    dt, shape, content, strings = 0, [], None, []
    others: list[tuple[int, int, int, int]] = []
    for field, wt, a, b in w.iter_fields(buf, start, end):
        if field == 1 and wt == w.VARINT:
            dt = a
        elif field == 2 and wt == w.LEN:
            shape = _decode_shape(buf, a, b)
        elif field == 4 and wt == w.LEN:
            content = buf[a:b]
        elif field == 8 and wt == w.LEN:
            strings.append(buf[a:b])
        else:
            others.append((field, wt, a, b))
    count = 1
    for size in shape:
        count *= size
    if dt in (d.DT_INVALID, d.DT_STRING):
        return _strings(strings, shape, count), None
    orig = None
    if dt == d.DT_BFLOAT16:
        np_dtype, orig = np.dtype("<u2"), d.BFLOAT16
    else:
        np_dtype = d.numpy_dtype_of(dt)
    if content is not None and len(content):
        if len(content) != count * np_dtype.itemsize:
            raise CorruptRecord(f"tensor content is {len(content)} bytes, shape {shape} needs {count * np_dtype.itemsize}")
        arr = np.frombuffer(content, dtype=np_dtype)
        arr = arr.copy() if not arr.flags.writeable else arr
    else:
        arr = typed_values(buf, others, dt, np_dtype, count)
    arr = arr.reshape(shape)
    if orig == d.BFLOAT16:
        arr = d.bfloat16_bits_to_float32(arr)
    return arr.astype(arr.dtype.newbyteorder("="), copy=False), orig


def _strings(strings: list[memoryview], shape: list[int], count: int) -> np.ndarray[Any, Any]:
    if len(strings) != count:
        raise CorruptRecord(f"string tensor has {len(strings)} values, shape {shape} needs {count}")
    raw = [bytes(s) for s in strings]
    try:
        values: list[Any] = [s.decode("utf-8") for s in raw]
    except UnicodeDecodeError:
        values = raw  # not text: keep the bytes
    if not values:
        return np.array([], dtype=str).reshape(shape)
    # numpy's fixed-width str/bytes dtypes drop trailing NULs; keep such values exact as objects.
    lossy = any(v.endswith("\x00" if isinstance(v, str) else b"\x00") for v in values)
    arr = np.empty(len(values), dtype=object) if lossy else np.array(values)
    if lossy:
        arr[:] = values
    return arr.reshape(shape)
