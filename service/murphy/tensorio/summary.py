"""TensorBoard event files: scalar and histogram summaries in TFRecord framing, written by hand.

The messages (field numbers from TensorFlow's ``event.proto`` / ``summary.proto``):
``Event{wall_time=1 double, step=2 int64, file_version=3 string, summary=5}``,
``Summary{value=1 repeated}``, ``Summary.Value{tag=1, simple_value=2 float, histo=5}``,
``HistogramProto{min=1, max=2, num=3, sum=4, sum_squares=5 (doubles), bucket_limit=6, bucket=7
(packed doubles)}``. A file's first record is ``file_version "brain.Event:2"``; its name must
contain ``tfevents``. Unlike smdebug's tensor files (magic footer), these records carry the
payload's real masked CRC32C, as TensorFlow's writer does.

Non-finite values: a histogram holds only the finite elements (TensorBoard's histograms cannot
show NaN, and tensorboardX refuses them); :func:`nonfinite_counts` gives the NaN/Inf counts, which
the writers add as ``nonfinite/<tensor>/nan_count`` and ``/inf_count`` scalars.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any

import numpy as np

from murphy.tensorio import wire as w
from murphy.tensorio.crc32c import masked_crc32c

FILE_VERSION = b"brain.Event:2"
_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def record(payload: bytes) -> bytes:
    """One TFRecord with TensorFlow's real CRCs."""
    length = _U64.pack(len(payload))
    return b"".join((length, _U32.pack(masked_crc32c(length)), payload, _U32.pack(masked_crc32c(payload))))


def _event(step: int, wall_time: float, body: bytes) -> bytes:
    head = w.fixed64_double(1, wall_time)
    if step:
        head += w.key(2, w.VARINT) + w.encode_varint(step)
    return head + body


def file_version_event(wall_time: float | None = None) -> bytes:
    return _event(0, time.time() if wall_time is None else wall_time, w.len_delimited(3, FILE_VERSION))


def _summary(value: bytes, step: int, wall_time: float | None) -> bytes:
    return _event(step, time.time() if wall_time is None else wall_time, w.len_delimited(5, w.len_delimited(1, value)))


def scalar_event(tag: str, value: float, step: int, wall_time: float | None = None) -> bytes:
    """``value`` as a float32 ``simple_value`` (NaN and ±Inf are valid float32 bit patterns)."""
    body = w.len_delimited(1, tag.encode("utf-8")) + w.key(2, 5) + _F32.pack(float(value))
    return _summary(body, step, wall_time)


def histogram_proto(values: Any, bins: int = 30) -> bytes | None:
    """The HistogramProto of the finite elements of ``values`` (None when there are none)."""
    a = np.asarray(values, dtype=np.float64).ravel()
    a = a[np.isfinite(a)]
    if a.size == 0:
        return None
    lo, hi = float(a.min()), float(a.max())
    counts, edges = np.histogram(a, bins=bins, range=(lo, hi) if hi > lo else (lo - 0.5, hi + 0.5))
    packed_limits = b"".join(struct.pack("<d", e) for e in edges[1:].tolist())
    packed_counts = b"".join(struct.pack("<d", float(c)) for c in counts.tolist())
    with np.errstate(over="ignore"):
        total, squares = float(a.sum()), float(np.dot(a, a))
    return b"".join((
        w.fixed64_double(1, lo), w.fixed64_double(2, hi), w.fixed64_double(3, float(a.size)),
        w.fixed64_double(4, total), w.fixed64_double(5, squares),
        w.len_delimited(6, packed_limits), w.len_delimited(7, packed_counts),
    ))


def histogram_event(tag: str, values: Any, step: int, wall_time: float | None = None, bins: int = 30) -> bytes | None:
    proto = histogram_proto(values, bins)
    if proto is None:
        return None
    return _summary(w.len_delimited(1, tag.encode("utf-8")) + w.len_delimited(5, proto), step, wall_time)


def nonfinite_counts(values: Any) -> tuple[int, int]:
    a = np.asarray(values)
    if a.dtype.kind != "f":
        return 0, 0
    return int(np.count_nonzero(np.isnan(a))), int(np.count_nonzero(np.isinf(a)))


class EventFileWriter:
    """Appends summary events to one local ``events.out.tfevents.<time>.<host>[.<suffix>]`` file
    in ``run_dir`` (created on the first write, so an unused run leaves no file)."""

    def __init__(self, run_dir: str | os.PathLike[str], suffix: str = "") -> None:
        self.run_dir = os.fspath(run_dir)
        self.suffix = suffix
        self.path: str | None = None
        self._file: Any = None

    def _open(self) -> Any:
        if self._file is None:
            os.makedirs(self.run_dir, exist_ok=True)
            name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}{'.' + self.suffix if self.suffix else ''}"
            self.path = os.path.join(self.run_dir, name)
            self._file = open(self.path, "ab")  # noqa: SIM115 - kept open across steps, closed by close()
            self._file.write(record(file_version_event()))
        return self._file

    def write(self, payload: bytes | None) -> None:
        if payload is not None:
            self._open().write(record(payload))

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def step_summaries(step: int, items: Any, wall_time: float | None = None, bins: int = 30) -> list[bytes]:
    """The events of one step. ``items``: ``(tensor name, value, [(collection, histogram?)])``.

    Tags are ``<collection>/<tensor>``: a scalar collection's tensor (or any one-element value)
    is a scalar; another collection's is a histogram when the collection saves histograms. A
    non-scalar with NaN/Inf elements also gets ``nonfinite/<tensor>/nan_count`` and
    ``/inf_count`` (once per tensor), so the step where they begin shows in TensorBoard.
    """
    from murphy.core.collection import SCALAR_COLLECTIONS

    out: list[bytes] = []
    for name, value, collections in items:
        a = np.asarray(value)
        if a.dtype.kind not in "fiub":
            continue
        scalar = a.size == 1
        wrote_hist = False
        for cname, histogram in collections:
            tag = f"{cname}/{name}"
            if scalar or cname in SCALAR_COLLECTIONS:
                if a.size:
                    out.append(scalar_event(tag, float(a.ravel()[0]), step, wall_time))
            elif histogram:
                ev = histogram_event(tag, a, step, wall_time, bins)
                wrote_hist = True
                if ev is not None:
                    out.append(ev)
        if wrote_hist:
            nan, inf = nonfinite_counts(a)
            if nan or inf:
                out.append(scalar_event(f"nonfinite/{name}/nan_count", nan, step, wall_time))
                out.append(scalar_event(f"nonfinite/{name}/inf_count", inf, step, wall_time))
    return out
