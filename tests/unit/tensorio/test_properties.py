"""Property tests: arbitrary tensors round-trip exactly; arbitrary damage yields only murphy errors."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from murphy.core.modes import ModeKeys
from murphy.exceptions import MurphyError
from murphy.storage import InMemoryObjectStore
from murphy.tensorio.events import decode_events, decode_tensor_event, encode_tensor_event
from murphy.tensorio.framing import frame, iter_records, read_one
from murphy.tensorio.index import StepIndex
from murphy.tensorio.reader import read_event_file, read_index, read_tensor_record
from murphy.tensorio.writer import StepWriter

DTYPES = [
    "<f2", ">f4", "<f4", "<f8", "i1", ">i2", "<i4", "<i8", "u1", "<u2", ">u4", "<u8", "?", "<c8", ">c16",
]  # fmt: skip

arrays = st.sampled_from(DTYPES).flatmap(
    lambda dt: hnp.arrays(
        np.dtype(dt),
        hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=5),
        elements=hnp.from_dtype(np.dtype(dt), allow_nan=True, allow_infinity=True) if np.dtype(dt).kind in "fc" else None,
    )
)
names = st.text(min_size=1, max_size=40)
modes = st.sampled_from(list(ModeKeys))
steps = st.integers(0, 2**62)
strings = hnp.arrays(
    np.dtype(object),
    hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4),
    elements=st.text(max_size=10),
)


@given(arr=arrays, name=names, step=steps, mode=modes, mode_step=steps)
@settings(max_examples=300, deadline=None)
def test_numeric_round_trip(arr: np.ndarray[Any, Any], name: str, step: int, mode: ModeKeys, mode_step: int) -> None:
    payload = encode_tensor_event(name, arr, step=step, mode=mode, mode_step=mode_step, wall_time=1.0)
    ev = decode_tensor_event(read_one(frame(payload)))
    assert (ev.name, ev.step, ev.mode, ev.mode_step, ev.wall_time) == (name, step, mode, mode_step, 1.0)
    assert ev.value.dtype == arr.dtype.newbyteorder("=") and ev.value.shape == arr.shape
    assert ev.value.tobytes() == arr.astype(arr.dtype.newbyteorder("=")).tobytes()


@given(arr=strings, name=names)
@settings(max_examples=100, deadline=None)
def test_string_round_trip(arr: np.ndarray[Any, Any], name: str) -> None:
    ev = decode_tensor_event(encode_tensor_event(name, arr, step=0, mode=ModeKeys.GLOBAL, mode_step=0))
    assert ev.value.shape == arr.shape and ev.value.tolist() == arr.tolist()


@given(tensors=st.lists(st.tuples(names, arrays), min_size=1, max_size=5), step=st.integers(0, 10**9))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_step_writer_round_trip(tensors: list[tuple[str, np.ndarray[Any, Any]]], step: int) -> None:
    store = InMemoryObjectStore()
    with StepWriter(store, step, "worker_0", ModeKeys.TRAIN, step // 2) as w:
        for name, arr in tensors:
            w.add(name, arr)
    idx = read_index(store, w.index_file_name)
    assert len(idx.tensors) == len(tensors)
    for entry, (name, arr) in zip(idx.tensors, tensors, strict=True):
        ev = read_tensor_record(store, idx.event_file_name, entry.start_idx, entry.length)
        assert ev.name == name and ev.value.tobytes() == arr.astype(arr.dtype.newbyteorder("=")).tobytes()


def _decode_all(data: bytes) -> list[Any]:
    out = []
    for payload in iter_records(data):
        out.extend(decode_events(payload))
    return out


@given(data=st.binary(max_size=300))
@settings(max_examples=500, deadline=None)
def test_random_bytes_raise_only_murphy_errors(data: bytes) -> None:
    for fn in (_decode_all, decode_events, read_one, lambda b: decode_events(read_one(frame(b)))):
        with contextlib.suppress(MurphyError):
            fn(data)
    with contextlib.suppress(MurphyError):
        StepIndex.from_json_bytes(data)


def _sample_file() -> tuple[bytes, list[bytes]]:
    store = InMemoryObjectStore()
    with StepWriter(store, 7, mode=ModeKeys.EVAL, mode_step=3) as w:
        w.add("a", np.arange(6, dtype=np.int16).reshape(2, 3))
        w.add("s", np.array(["x", "yz"]))
        w.add("loss", np.array(1.5, dtype=np.float32))
        w.add("bf", np.array([1, 2], dtype=np.uint16), original_dtype="bfloat16")
    data = store.get(w.event_file_name)
    payloads = [bytes(p) for p in iter_records(data)]
    return data, payloads


SAMPLE, SAMPLE_PAYLOADS = _sample_file()
SAMPLE_EVENTS = [(e.name, e.value.tobytes()) for p in SAMPLE_PAYLOADS for e in decode_events(p)]


@given(cut=st.integers(0, len(SAMPLE)))
def test_truncations_yield_a_correct_prefix(cut: int) -> None:
    got = [(e.name, e.value.tobytes()) for e in _decode_all(SAMPLE[:cut])]
    assert got == SAMPLE_EVENTS[: len(got)]
    if cut == len(SAMPLE):
        assert len(got) == len(SAMPLE_EVENTS)


@given(pos=st.integers(0, len(SAMPLE) - 1), bit=st.integers(0, 7))
@settings(max_examples=400, deadline=None)
def test_bit_flips_in_a_file_give_murphy_errors_or_decodable_data(pos: int, bit: int) -> None:
    damaged = bytearray(SAMPLE)
    damaged[pos] ^= 1 << bit
    try:
        events = _decode_all(bytes(damaged))
    except MurphyError:
        return
    assert len(events) <= len(SAMPLE_EVENTS)


@given(idx=st.integers(0, len(SAMPLE_PAYLOADS) - 1), data=st.data())
@settings(max_examples=400, deadline=None)
def test_payload_mutations_never_leak_non_murphy_errors(idx: int, data: st.DataObject) -> None:
    payload = bytearray(SAMPLE_PAYLOADS[idx])
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(payload) - 1))
        payload[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(payload)))
    with contextlib.suppress(MurphyError):
        decode_events(bytes(payload[:cut]))


def test_read_event_file_on_random_garbage_raises_a_murphy_error() -> None:
    store = InMemoryObjectStore()
    store.put("events/x.tfevents", bytes(range(256)) * 4)
    with contextlib.suppress(MurphyError):
        list(read_event_file(store, "events/x.tfevents"))
