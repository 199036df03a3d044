from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.exceptions import CorruptRecord, UnsupportedDType
from murphy.tensorio import dtypes as d
from murphy.tensorio import wire as w
from murphy.tensorio.events import decode_events, decode_tensor_event, encode_tensor_event
from murphy.tensorio.framing import frame, read_one

# Records written by smdebug 1.0.34's FileWriter.write_tensor (step 3, EVAL, mode_step 4,
# wall_time 1234.5), framed. murphy must produce exactly these bytes.
SMDEBUG_RECORDS: dict[str, tuple[Any, str]] = {
    "f16": (
        np.arange(6, dtype=np.float16).reshape(2, 3),
        "5b000000000000001b01028a0900000000004a934010032a4e0a4c0a036631364228081312161209080212056631365f32"
        "1209080312056631365f33220c0000003c00400042004400454a1b0a0e0a096d6f64655f737465701201340a090a046d6f"
        "6465120132b3c02d06",
    ),
    "loss": (
        np.array(0.25, dtype=np.float32),
        "3e00000000000000d9d240e70900000000004a934010032a310a2f0a046c6f7373420a0801120022040000803e4a1b0a0e"
        "0a096d6f64655f737465701201340a090a046d6f6465120132b3c02d06",
    ),
    "s": (
        np.array(["hi", "there"]),
        "4700000000000000bac3fb9b0900000000004a934010032a3a0a380a017342161209120708021203735f32420268694205"
        "74686572654a1b0a0e0a096d6f64655f737465701201340a090a046d6f6465120132b3c02d06",
    ),
    "i8": (
        np.array([-3], dtype=np.int8),
        "4300000000000000b18525a00900000000004a934010032a360a340a02693842110806120a12080801120469385f312201"
        "fd4a1b0a0e0a096d6f64655f737465701201340a090a046d6f6465120132b3c02d06",
    ),
}

ALL_DTYPES = [
    "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128",
]  # fmt: skip

EXPECTED_DT = {
    "float16": 19, "float32": 1, "float64": 2, "int8": 6, "int16": 5, "int32": 3, "int64": 9,
    "uint8": 4, "uint16": 17, "uint32": 22, "uint64": 23, "bool": 10, "complex64": 8, "complex128": 18,
}  # fmt: skip


def enc(name: str, value: Any, **kw: Any) -> bytes:
    args: dict[str, Any] = {"step": 3, "mode": ModeKeys.EVAL, "mode_step": 4, "wall_time": 1234.5}
    args.update(kw)
    return encode_tensor_event(name, value, **args)


@pytest.mark.parametrize("name", sorted(SMDEBUG_RECORDS))
def test_bytes_identical_to_smdebug(name: str) -> None:
    value, hexdata = SMDEBUG_RECORDS[name]
    assert frame(enc(name, value)).hex() == hexdata
    ev = decode_tensor_event(read_one(bytes.fromhex(hexdata)))
    assert (ev.name, ev.step, ev.mode, ev.mode_step, ev.wall_time) == (name, 3, ModeKeys.EVAL, 4, 1234.5)
    assert ev.value.dtype == value.dtype and ev.value.shape == value.shape
    assert np.array_equal(ev.value, value)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_round_trips_exactly(dtype: str) -> None:
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 256, size=(3, 4, 2, np.dtype(dtype).itemsize), dtype=np.uint8)
    arr = np.ascontiguousarray(arr).view(dtype).reshape(3, 4, 2)  # arbitrary bit patterns incl. NaNs
    if dtype == "bool":
        arr = arr.view(np.uint8) % 2 == 1
    assert d.dt_of(arr.dtype) == EXPECTED_DT[dtype]
    ev = decode_tensor_event(enc("t", arr))
    assert ev.value.dtype == arr.dtype and ev.value.shape == arr.shape
    assert ev.value.tobytes() == arr.tobytes()
    assert ev.value.flags.writeable and ev.original_dtype is None


def test_big_endian_and_non_contiguous_inputs() -> None:
    arr = np.arange(12, dtype=">f8").reshape(3, 4).T
    ev = decode_tensor_event(enc("t", arr))
    assert ev.value.dtype == np.float64 and np.array_equal(ev.value, arr)


def test_scalars_are_wrapped_to_shape_one_and_zero_d_arrays_keep_empty_shape() -> None:
    assert decode_tensor_event(enc("t", 5)).value.shape == (1,)
    assert decode_tensor_event(enc("t", 2.5)).value.tolist() == [2.5]
    assert decode_tensor_event(enc("t", np.float32(2))).value.dtype == np.float32
    assert decode_tensor_event(enc("t", True)).value.dtype == np.bool_
    zero_d = decode_tensor_event(enc("t", np.array(7, dtype=np.int16))).value
    assert zero_d.shape == () and zero_d.dtype == np.int16 and zero_d == 7
    assert decode_tensor_event(enc("t", [1, 2, 3])).value.tolist() == [1, 2, 3]


def test_strings() -> None:
    ev = decode_tensor_event(enc("t", np.array(["a", "ünïcode", ""], dtype=object)))
    assert ev.value.tolist() == ["a", "ünïcode", ""]
    ev = decode_tensor_event(enc("t", np.array([[b"x", b"yz"]])))
    assert ev.value.shape == (1, 2) and ev.value.tolist() == [["x", "yz"]]
    assert decode_tensor_event(enc("t", "hello")).value.tolist() == ["hello"]
    with pytest.raises(UnsupportedDType):
        enc("t", np.array([1, "a"], dtype=object))


def test_bfloat16_from_bit_patterns_and_float32() -> None:
    bits = np.array([0x3F80, 0xC040, 0x7F80, 0x0001], dtype=np.uint16)  # 1, -3, inf, subnormal
    ev = decode_tensor_event(enc("b", bits, original_dtype="bfloat16"))
    expected = (bits.astype(np.uint32) << 16).view(np.float32)
    assert ev.original_dtype == "bfloat16" and ev.value.dtype == np.float32
    assert ev.value.tobytes() == expected.tobytes()
    ev2 = decode_tensor_event(enc("b", expected, original_dtype="bfloat16"))
    assert ev2.original_dtype == "bfloat16" and ev2.value.tobytes() == expected.tobytes()
    with pytest.raises(UnsupportedDType):
        enc("b", bits, original_dtype="float8")


def test_bfloat16_is_stored_as_dt_float_with_a_trailing_plugin_entry() -> None:
    payload = enc("b", np.array([0x3F80], dtype=np.uint16), original_dtype="bfloat16")
    assert b"\x08\x01" in payload  # dtype DT_FLOAT
    assert payload.endswith(
        w.len_delimited(1, w.len_delimited(1, b"murphy_dtype") + w.len_delimited(2, b"bfloat16"))
    )


@pytest.mark.parametrize("value", [np.array([np.datetime64("2020-01-01")]), np.array([None]), object()])
def test_unsupported_values(value: Any) -> None:
    with pytest.raises(UnsupportedDType):
        enc("t", value)


def test_step_zero_negative_and_large() -> None:
    for step in (0, 1, 2**40, -1):
        assert decode_tensor_event(enc("t", 1.0, step=step)).step == step
    for mode in ModeKeys:
        ev = decode_tensor_event(enc("t", 1.0, mode=mode, mode_step=123456))
        assert (ev.mode, ev.mode_step) == (mode, 123456)


# --- foreign records ---------------------------------------------------------------------


def _unknown_fields() -> bytes:
    return b"".join(
        [
            w.key(100, w.VARINT) + w.encode_varint(2**63),
            w.key(101, w.FIXED64) + b"\x00" * 8,
            w.key(102, w.FIXED32) + b"\x00" * 4,
            w.len_delimited(103, b"junk"),
            w.key(104, w.START_GROUP) + w.key(1, w.VARINT) + b"\x05" + w.key(104, w.END_GROUP),
        ]
    )


def _event(value_msg: bytes, extra: bytes = b"", step: int = 9) -> bytes:
    return b"".join(
        [
            w.len_delimited(3, b"brain.Event:2"),  # file_version, as TF's first record has
            extra,
            w.fixed64_double(1, 1.5),
            w.key(2, w.VARINT) + w.encode_varint(step),
            w.len_delimited(5, extra + w.len_delimited(1, value_msg)),
        ]
    )


def _tensor(dt: int, shape: list[int], *fields: bytes, extra: bytes = b"") -> bytes:
    dims = b"".join(w.len_delimited(2, extra + w.key(1, w.VARINT) + w.encode_varint(s)) for s in shape)
    head = (w.key(1, w.VARINT) + w.encode_varint(dt)) if dt else b""
    return head + extra + w.len_delimited(2, dims + extra) + b"".join(fields)


def _value(name: str, tensor: bytes, plugins: list[tuple[str, str]] = (), extra: bytes = b"") -> bytes:  # type: ignore[assignment]
    pd = b"".join(
        w.len_delimited(1, extra + w.len_delimited(1, n.encode()) + w.len_delimited(2, c.encode())) for n, c in plugins
    )
    return extra + w.len_delimited(1, name.encode()) + w.len_delimited(8, tensor) + w.len_delimited(9, pd + extra)


def test_unknown_fields_of_every_wire_type_are_skipped_at_every_level() -> None:
    x = _unknown_fields()
    content = np.array([1.0, 2.0], dtype=np.float32).tobytes()
    tensor = _tensor(1, [2], w.len_delimited(4, content), extra=x)
    payload = _event(_value("t", tensor, [("mode", "2"), ("x", "y"), ("mode_step", "5")], extra=x), extra=x)
    ev = decode_tensor_event(payload)
    assert ev.name == "t" and ev.value.tolist() == [1.0, 2.0]
    assert (ev.step, ev.mode, ev.mode_step, ev.wall_time) == (9, ModeKeys.EVAL, 5, 1.5)


def test_missing_plugin_data_defaults_to_global_and_the_global_step() -> None:
    tensor = _tensor(9, [1], w.len_delimited(4, np.array([4], "<i8").tobytes()))
    ev = decode_tensor_event(_event(_value("t", tensor), step=42))
    assert (ev.mode, ev.mode_step) == (ModeKeys.GLOBAL, 42)


def test_records_without_tensors() -> None:
    assert decode_events(w.len_delimited(3, b"brain.Event:2") + w.fixed64_double(1, 1.0)) == []
    simple = w.len_delimited(1, b"loss") + w.key(2, w.FIXED32) + struct.pack("<f", 1.0)
    assert decode_events(_event(simple)) == []
    with pytest.raises(CorruptRecord):
        decode_tensor_event(b"")


@pytest.mark.parametrize(
    ("dt", "shape", "fields", "expected"),
    [
        (1, [3], [w.len_delimited(5, struct.pack("<3f", 1, 2, 3))], np.array([1, 2, 3], "f4")),
        (1, [3], [w.key(5, w.FIXED32) + struct.pack("<f", 7)], np.array([7, 7, 7], "f4")),
        (2, [], [w.key(6, w.FIXED64) + struct.pack("<d", 0.5)], np.array(0.5)),
        (3, [2], [w.key(7, w.VARINT) + w.encode_varint(-5), w.key(7, w.VARINT) + b"\x03"], np.array([-5, 3], "i4")),
        (6, [2], [w.len_delimited(7, w.encode_varint(-1) + b"\x02")], np.array([-1, 2], "i1")),
        (9, [1], [w.key(10, w.VARINT) + w.encode_varint(-(2**40))], np.array([-(2**40)], "i8")),
        (10, [2], [w.len_delimited(11, b"\x01\x00")], np.array([True, False])),
        (19, [1], [w.key(13, w.VARINT) + w.encode_varint(0x3C00)], np.array([1.0], "f2")),
        (8, [1], [w.len_delimited(9, struct.pack("<2f", 1, 2))], np.array([1 + 2j], "c8")),
        (18, [1], [w.len_delimited(12, struct.pack("<2d", 3, 4))], np.array([3 + 4j], "c16")),
        (22, [1], [w.key(16, w.VARINT) + w.encode_varint(2**32 - 1)], np.array([2**32 - 1], "u4")),
        (23, [1], [w.key(17, w.VARINT) + w.encode_varint(2**64 - 1)], np.array([2**64 - 1], "u8")),
        (4, [2, 2], [], np.zeros((2, 2), "u1")),
    ],
)
def test_tensorflow_typed_value_fields(dt: int, shape: list[int], fields: list[bytes], expected: Any) -> None:
    ev = decode_tensor_event(_event(_value("t", _tensor(dt, shape, *fields))))
    assert ev.value.dtype == expected.dtype and ev.value.shape == expected.shape
    assert ev.value.tobytes() == expected.tobytes()


def test_tensorflow_dt_string_and_dt_bfloat16() -> None:
    strings = _tensor(7, [2], w.len_delimited(8, b"a"), w.len_delimited(8, b"\xff"))
    assert decode_tensor_event(_event(_value("t", strings))).value.tolist() == [b"a", b"\xff"]
    bf = _tensor(14, [2], w.len_delimited(4, np.array([0x3F80, 0x4000], "<u2").tobytes()))
    ev = decode_tensor_event(_event(_value("t", bf)))
    assert ev.original_dtype == "bfloat16" and ev.value.tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    "tensor",
    [
        _tensor(1, [3], w.len_delimited(4, b"\x00" * 8)),  # content size mismatch
        _tensor(1, [1], w.len_delimited(5, b"\x00" * 8)),  # too many values
        _tensor(99, [1], w.len_delimited(4, b"\x00")),  # unknown dtype
        _tensor(0, [2], w.len_delimited(8, b"a")),  # string count mismatch
        _tensor(1, [2**40, 2**30]),  # implausible expansion
        _tensor(1, [1], w.len_delimited(5, b"\x00" * 3)),  # partial packed element
    ],
)
def test_inconsistent_tensors_raise_murphy_errors(tensor: bytes) -> None:
    with pytest.raises((CorruptRecord, UnsupportedDType)):
        decode_tensor_event(_event(_value("t", tensor)))


def test_bad_plugin_data_is_corrupt() -> None:
    tensor = _tensor(1, [1], w.len_delimited(4, b"\x00" * 4))
    for plugins in ([("mode", "7")], [("mode_step", "x")], [("mode", "")]):
        with pytest.raises(CorruptRecord):
            decode_tensor_event(_event(_value("t", tensor, plugins)))
