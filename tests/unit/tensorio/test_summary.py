"""TensorBoard summaries (murphy.tensorio.summary): framing with real CRCs, tags, non-finite rule.
TensorBoard's own reader checks the files in tests/ui/test_tensorboard.py."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np

from murphy.tensorio import wire as w
from murphy.tensorio.crc32c import masked_crc32c
from murphy.tensorio.framing import iter_records
from murphy.tensorio.summary import EventFileWriter, histogram_proto, record, step_summaries


def _tags(payload: memoryview) -> list[str]:
    fields = {f: (s, e) for f, _, s, e in w.iter_fields(payload, 0, len(payload))}
    if 5 not in fields:
        return []
    s, e = fields[5]
    value = w.iter_fields(payload, s, e)[0]
    inner = w.iter_fields(payload, value[2], value[3])
    return [bytes(payload[a:b]).decode() for f, _, a, b in inner if f == 1]


def test_records_carry_real_crcs_and_the_file_starts_with_its_version(tmp_path: Path) -> None:
    rec = record(b"payload")
    assert struct.unpack("<I", rec[-4:])[0] == masked_crc32c(b"payload")
    writer = EventFileWriter(tmp_path / "TRAIN", "w0")
    events = step_summaries(3, [("loss", np.float32(math.nan), [("losses", False)]),
                                ("fc.weight", np.array([1.0, math.inf, 3.0]), [("weights", True)]),
                                ("names", np.array(["a"]), [("default", True)])])
    for ev in events:
        writer.write(ev)
    writer.close()
    assert writer.path is not None and "tfevents" in writer.path
    records = list(iter_records(Path(writer.path).read_bytes()))
    assert b"brain.Event:2" in bytes(records[0])
    assert [t for r in records[1:] for t in _tags(r)] == [
        "losses/loss", "weights/fc.weight", "nonfinite/fc.weight/nan_count", "nonfinite/fc.weight/inf_count"]


def test_histograms_hold_only_finite_values() -> None:
    assert histogram_proto([math.nan, math.inf]) is None
    proto = histogram_proto([1.0, 2.0, math.nan], bins=2)
    assert proto is not None
    fields = {f: (s, e) for f, _, s, e in w.iter_fields(memoryview(proto), 0, len(proto))}
    assert w.read_double(memoryview(proto), fields[3][0]) == 2.0  # num: the finite ones
