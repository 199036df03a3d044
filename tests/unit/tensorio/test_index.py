from __future__ import annotations

import json

import pytest

from murphy.core.modes import ModeKeys
from murphy.exceptions import CorruptIndex
from murphy.tensorio.index import IndexEntry, ShapeEntry, StepIndex

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
        b'{"meta": {"mode": "TRAIN", "mode_step": 1}, "tensor_payload": []}',
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


def test_every_torn_prefix_is_corrupt() -> None:
    data = StepIndex(ModeKeys.TRAIN, 3, EVENTS, [IndexEntry("a", 0, 20)]).to_json_bytes()
    for cut in range(len(data)):
        with pytest.raises(CorruptIndex):
            StepIndex.from_json_bytes(data[:cut])
