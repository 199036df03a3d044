from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from murphy.core.modes import ModeKeys
from murphy.exceptions import CorruptIndex
from murphy.tensorio.index import IndexEntry, IndexParser, ParsedIndex, ShapeEntry, StepIndex

EVENTS = "events/000000000003/000000000003_worker_0.tfevents"


def test_exact_schema() -> None:
    idx = StepIndex(ModeKeys.TRAIN, 3, EVENTS, [IndexEntry("Net_fc1.weight", 0, 260)])
    assert idx.to_json_bytes() == (
        b'{"meta": {"mode": "TRAIN", "mode_step": 3, "event_file_name": "' + EVENTS.encode() + b'"}, '
        b'"tensor_payload": [{"tensorname": "Net_fc1.weight", "start_idx": 0, "length": 260}], '
        b'"shape_payload": []}'
    )
    with_shapes = StepIndex(ModeKeys.EVAL, 0, EVENTS, [], [ShapeEntry("a", "a:0", (8, 4))])
    assert json.loads(with_shapes.to_json_bytes())["shape_payload"] == [
        {"tensorname": "a", "originalname": "a:0", "shape": [8, 4]}
    ]


def test_round_trip() -> None:
    idx = StepIndex(
        ModeKeys.PREDICT, 11, EVENTS, [IndexEntry("a", 0, 20), IndexEntry("b", 20, 30)], [ShapeEntry("a", "a", ())]
    )
    assert StepIndex.from_json_bytes(idx.to_json_bytes()) == idx


def test_either_payload_key_is_enough() -> None:
    meta = {"mode": "GLOBAL", "mode_step": 1, "event_file_name": EVENTS}
    only_shapes = json.dumps({"meta": meta, "shape_payload": [{"tensorname": "x", "shape": [2]}]})
    parsed = StepIndex.from_json_bytes(only_shapes.encode())
    assert parsed.tensors == [] and parsed.shapes == [ShapeEntry("x", "x", (2,))]


@pytest.mark.parametrize(
    "meta",
    [{"mode": "TRAIN", "mode_step": 1}, {"mode": "TRAIN", "mode_step": 1, "event_file_name": ""}],
)
def test_shape_only_index_without_events_file(meta: dict[str, object]) -> None:
    """smdebug writes a shape-only step's meta without event_file_name (or with ""): valid."""
    doc = json.dumps({"meta": meta, "tensor_payload": [], "shape_payload": [
        {"tensorname": "x", "originalname": "x", "shape": [2, 3]}]}).encode()
    for parsed in (StepIndex.from_json_bytes(doc), IndexParser().parse(doc)):
        assert (parsed.mode, parsed.mode_step, parsed.event_file_name) == (ModeKeys.TRAIN, 1, "")


@pytest.mark.parametrize(
    "doc",
    [
        b"",
        b'{"meta": {"mode": "TRAIN"',
        b"\x80",
        b"[]",
        b'{"meta": {}, "tensor_payload": []}',
        b'{"tensor_payload": []}',
        b'{"meta": {"mode": "TRAIN", "mode_step": 1, "event_file_name": "e"}}',
        b'{"meta": {"mode": "TRAINING", "mode_step": 1, "event_file_name": "e"}, "tensor_payload": []}',
        b'{"meta": {"mode": "TRAIN", "mode_step": "1", "event_file_name": "e"}, "tensor_payload": []}',
        b'{"meta": {"mode": "TRAIN", "mode_step": 1}, "tensor_payload": [{"tensorname": "a", "start_idx": 0, "length": 5}]}',
        b'{"meta": {"mode": "TRAIN", "mode_step": 1, "event_file_name": 3}, "tensor_payload": []}',
        b'{"meta": {"mode": "TRAIN", "mode_step": 1, "event_file_name": "e"}, "tensor_payload": {}}',
        b'{"meta": {"mode": "TRAIN", "mode_step": 1, "event_file_name": "e"}, "tensor_payload": [{"tensorname": "a", "start_idx": -1, "length": 3}]}',
        b'{"meta": {"mode": "TRAIN", "mode_step": 1, "event_file_name": "e"}, "tensor_payload": [{"tensorname": "a", "start_idx": 0, "length": 0}]}',
        b'{"meta": {"mode": "TRAIN", "mode_step": 1, "event_file_name": "e"}, "tensor_payload": [{"tensorname": 1, "start_idx": 0, "length": 5}]}',
        b'{"meta": {"mode": "TRAIN", "mode_step": 1, "event_file_name": "e"}, "tensor_payload": [], "shape_payload": [{"tensorname": "a", "shape": "x"}]}',
    ],
)
def test_bad_index_files(doc: bytes) -> None:
    with pytest.raises(CorruptIndex):
        StepIndex.from_json_bytes(doc)
    with pytest.raises(CorruptIndex):
        IndexParser().parse(doc)


def _expected(data: bytes) -> ParsedIndex | type[CorruptIndex]:
    try:
        idx = StepIndex.from_json_bytes(data)
    except CorruptIndex:
        return CorruptIndex
    rows = tuple((e.tensorname, e.start_idx, e.length) for e in idx.tensors)
    return ParsedIndex(idx.mode, idx.mode_step, idx.event_file_name,
                       _table(rows, tuple(idx.shapes)))


def _table(rows: tuple[tuple[str, int, int], ...], shapes: tuple[ShapeEntry, ...]) -> object:
    return (rows, shapes, max((s + n for _, s, n in rows), default=0))


def _got(parser: IndexParser, data: bytes) -> ParsedIndex | type[CorruptIndex]:
    try:
        p = parser.parse(data)
    except CorruptIndex:
        return CorruptIndex
    t = p.table
    return ParsedIndex(p.mode, p.mode_step, p.event_file_name, _table(t.tensors, t.shapes))  # type: ignore[arg-type]


entries = st.lists(st.tuples(st.text(max_size=8), st.integers(0, 99), st.integers(1, 99)), max_size=4)


@given(steps=st.lists(st.integers(0, 10**6), min_size=1, max_size=4), rows=entries,
       mode=st.sampled_from(list(ModeKeys)), fname=st.text(min_size=1, max_size=12))
@settings(max_examples=200, deadline=None)
def test_parser_equals_step_index_and_shares_tables(steps: list[int], rows: list[tuple[str, int, int]],
                                                    mode: ModeKeys, fname: str) -> None:
    parser = IndexParser()
    tables = set()
    for step in steps:
        idx = StepIndex(mode, step, f"{fname}/{step}", [IndexEntry(*r) for r in rows])
        data = idx.to_json_bytes()
        assert _got(parser, data) == _expected(data)
        tables.add(id(parser.parse(data).table))
    if all(c not in fname for c in '"\\') and fname.isascii() and fname.isprintable():
        assert len(tables) == 1  # canonical files with equal payloads share one table


@given(pos=st.integers(0, 400), value=st.binary(min_size=0, max_size=3))
@settings(max_examples=400, deadline=None)
def test_parser_equals_step_index_on_damaged_files(pos: int, value: bytes) -> None:
    good = StepIndex(ModeKeys.TRAIN, 12, EVENTS, [IndexEntry("a", 0, 20), IndexEntry("b", 20, 30)]).to_json_bytes()
    parser = IndexParser()
    parser.parse(good)
    p = pos % len(good)
    bad = good[:p] + value + good[p + len(value):]
    assert _got(parser, bad) == _expected(bad)


def test_a_later_meta_key_wins_as_in_json() -> None:
    first = StepIndex(ModeKeys.TRAIN, 1, "e1", [IndexEntry("a", 0, 20)]).to_json_bytes()
    tricky = first[:-1] + b', "meta": {"mode": "EVAL", "mode_step": 9, "event_file_name": "e9"}}'
    parser = IndexParser()
    for data in (first, tricky, tricky):
        assert _got(parser, data) == _expected(data)
    assert parser.parse(tricky).mode is ModeKeys.EVAL


def test_every_torn_prefix_is_corrupt() -> None:
    data = StepIndex(ModeKeys.TRAIN, 3, EVENTS, [IndexEntry("a", 0, 20)]).to_json_bytes()
    for cut in range(len(data)):
        with pytest.raises(CorruptIndex):
            StepIndex.from_json_bytes(data[:cut])
