"""The template fast path (murphy.tensorio.fastpath) returns exactly what the generic decoder
returns, and falls back to it (same errors) on any difference from the learned layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from murphy.core.modes import ModeKeys
from murphy.exceptions import MurphyError
from murphy.tensorio import fastpath
from murphy.tensorio.events import TensorEvent, decode_tensor_event, encode_tensor_event
from murphy.tensorio.fastpath import RecordDecoder
from murphy.tensorio.framing import frame, read_one
from murphy.tensorio.wire import encode_varint

DTYPES = ["<f2", ">f4", "<f4", "<f8", "i1", ">i2", "<i4", "<i8", "u1", "<u2", ">u4", "<u8", "?", "<c8", ">c16"]
names = st.text(min_size=1, max_size=40)
modes = st.sampled_from(list(ModeKeys))


def _record(name: str, arr: Any, step: int, mode: ModeKeys = ModeKeys.TRAIN, mode_step: int | None = None,
            wall: float = 1.5, orig: str | None = None) -> bytes:
    return frame(encode_tensor_event(name, arr, step=step, mode=mode, mode_step=step if mode_step is None else mode_step,
                                     wall_time=wall, original_dtype=orig))


def _generic(rec: bytes) -> TensorEvent | type[BaseException]:
    try:
        return decode_tensor_event(read_one(rec))
    except MurphyError as exc:
        return type(exc)


def _fast(dec: RecordDecoder, buf: bytes, start: int, length: int, hint: str) -> TensorEvent | type[BaseException]:
    try:
        return dec.decode(buf, start, length, hint)
    except MurphyError as exc:
        return type(exc)


def _same(a: TensorEvent | type[BaseException], b: TensorEvent | type[BaseException]) -> None:
    if not isinstance(a, TensorEvent) or not isinstance(b, TensorEvent):
        assert a == b
        return
    assert (a.name, a.step, a.mode, a.mode_step, a.original_dtype) == (b.name, b.step, b.mode, b.mode_step, b.original_dtype)
    assert a.wall_time == b.wall_time or (a.wall_time != a.wall_time and b.wall_time != b.wall_time)
    assert a.value.dtype == b.value.dtype and a.value.shape == b.value.shape
    assert a.value.tobytes() == b.value.tobytes() and a.value.flags.writeable and a.value.flags.c_contiguous


def _hits(dec: RecordDecoder, buf: bytes, start: int, length: int, hint: str) -> bool:
    t = dec._templates.get((hint, length))
    return t is not None and dec._match(buf, start, length, t) is not None


same_shape_pairs = st.sampled_from(DTYPES).flatmap(
    lambda dt: hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4).flatmap(
        lambda shape: st.tuples(hnp.arrays(np.dtype(dt), shape), hnp.arrays(np.dtype(dt), shape))
    )
)


@given(pair=same_shape_pairs, name=names, mode=modes, steps=st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)),
       mode_step=st.integers(0, 10**6), wall=st.floats())
@settings(max_examples=300, deadline=None)
def test_fast_path_equals_generic_on_generated_records(
    pair: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]], name: str, mode: ModeKeys, steps: tuple[int, int],
    mode_step: int, wall: float,
) -> None:
    first = _record(name, pair[0], steps[0], mode, mode_step, wall)
    second = _record(name, pair[1], steps[1], mode, mode_step + 1, wall)
    dec = RecordDecoder()
    _same(_fast(dec, first, 0, len(first), name), _generic(first))
    buf = b"junk" + first + second  # records inside a whole file, at an offset
    _same(_fast(dec, buf, 4 + len(first), len(second), name), _generic(second))
    step_bytes = [len(encode_varint(s)) if s else 0 for s in steps]
    if len(first) == len(second) and step_bytes[0] == step_bytes[1]:
        # same layout: the second record must take the fast path
        assert _hits(dec, buf, 4 + len(first), len(second), name)


def test_fast_path_is_taken_and_exact_for_a_steady_tensor() -> None:
    dec = RecordDecoder()
    rng = np.random.default_rng(1)
    for step in range(200, 260):
        arr = rng.standard_normal((8, 16), dtype=np.float32)
        rec = _record("layer.weight", arr, step)
        ev = dec.decode(rec, 0, len(rec), "layer.weight")
        assert ev.step == step and ev.mode_step == step and ev.mode is ModeKeys.TRAIN
        np.testing.assert_array_equal(ev.value, arr)
        np.testing.assert_array_equal(dec.value(rec, 0, len(rec), "layer.weight"), arr)
        if step > 200:
            assert _hits(dec, rec, 0, len(rec), "layer.weight")


@given(pos=st.integers(0, 10_000), value=st.integers(0, 255), data=st.data())
@settings(max_examples=500, deadline=None)
def test_any_byte_change_gives_the_generic_result(pos: int, value: int, data: st.DataObject) -> None:
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    base = _record("w", arr, 300, mode_step=7, orig=data.draw(st.sampled_from([None, "bfloat16"])))
    dec = RecordDecoder()
    dec.decode(base, 0, len(base), "w")
    mutated = bytearray(_record("w", arr + 1, 301, mode_step=8))
    mutated[pos % len(mutated)] = value
    rec = bytes(mutated)
    _same(_fast(dec, rec, 0, len(rec), "w"), _generic(rec))


def test_falls_back_for_real_crc_footers_strings_and_truncation() -> None:
    from murphy.tensorio.crc32c import masked_crc32c

    dec = RecordDecoder()
    arr = np.ones((2, 2), dtype=np.float64)
    rec = _record("x", arr, 5)
    dec.decode(rec, 0, len(rec), "x")
    payload = read_one(rec).tobytes()
    tf_style = rec[:-4] + masked_crc32c(payload).to_bytes(4, "little")
    assert not _hits(dec, tf_style, 0, len(tf_style), "x")
    _same(_fast(dec, tf_style, 0, len(tf_style), "x"), _generic(tf_style))
    strings = frame(encode_tensor_event("s", np.array(["a", "b"], dtype=object), step=1, mode=ModeKeys.GLOBAL, mode_step=1))
    for _ in range(2):
        _same(_fast(dec, strings, 0, len(strings), "s"), _generic(strings))
    assert dec._templates[("s", len(strings))] is None
    with pytest.raises(MurphyError):
        dec.decode(rec[:-1], 0, len(rec), "x")


def test_bad_plugin_data_raises_like_the_generic_decoder() -> None:
    dec = RecordDecoder()
    good = _record("x", np.zeros(3, np.int32), 10, mode_step=12)
    dec.decode(good, 0, len(good), "x")
    bad = good.replace(b"12", b"1x")  # mode_step content, same length
    assert bad != good
    with pytest.raises(MurphyError, match="mode_step"):
        dec.decode(bad, 0, len(bad), "x")


def test_caches_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastpath, "MAX_TEMPLATES", 4)
    monkeypatch.setattr(fastpath, "MAX_SUFFIXES", 4)
    dec = RecordDecoder()
    for i in range(20):
        rec = _record(f"t{i}", np.zeros(2, np.float32), i)
        dec.decode(rec, 0, len(rec), f"t{i}")
    assert len(dec._templates) <= 4 and len(dec._suffixes) <= 4


@given(mode=modes, mode_step=st.integers(-(10**18), 10**18), cut=st.integers(0, 40), byte=st.integers(0, 255))
@settings(max_examples=300, deadline=None)
def test_canonical_metadata_match_equals_the_field_walk(mode: ModeKeys, mode_step: int, cut: int, byte: int) -> None:
    rec = _record("loss", np.float32(0.5), 7, mode, mode_step)
    t = fastpath._build(rec, 0, len(rec))
    assert t is not None
    suffix = rec[t.cpos + t.clen : len(rec) - 4]
    assert fastpath._canonical_suffix(suffix) == RecordDecoder()._parse_suffix(suffix)
    assert fastpath._canonical_suffix(suffix) is not None  # the writers' layout takes the match
    damaged = bytearray(suffix)
    damaged[cut % len(damaged)] = byte
    fast = fastpath._canonical_suffix(bytes(damaged))
    if fast is not None:  # a change the match accepts must mean what the field walk says
        assert fast == RecordDecoder()._parse_suffix(bytes(damaged))
