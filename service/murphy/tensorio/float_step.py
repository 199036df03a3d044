"""A step of Python-float tensors (XGBoost's metrics) written in one pass, byte for byte what
:class:`murphy.tensorio.writer.StepWriter` writes for ``np.array([value])`` of each.

A float record differs from the same tensor's record at another step only in the wall time, the
step field, the plugin data (the decimal mode step) and the 8 value bytes; the rest depends on
the tensor name and the lengths of the step field and of the plugin data. :class:`FloatSteps`
learns those bytes from the general encoder (per ``(name, step field length, plugin data
length)``, and the plugin data around the digits per (mode, number of digits)), so a step's
records are joins of cached pieces and packed doubles, the events file is one buffer (one
``write``) and the index JSON is formatted from cached per-name fragments (``json.dumps``' bytes).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring_ascii as _json_str

from murphy.core.modes import ModeKeys
from murphy.storage.base import ObjectStore
from murphy.tensorio import wire as w
from murphy.tensorio.events import encode_tensor_event_parts
from murphy.tensorio.framing import MAGIC_FOOTER_BYTES, frame_parts
from murphy.tensorio.locations import escape_worker, event_file_key, index_file_key

_F64 = struct.Struct("<d")
_MAX_LAYOUTS = 4096
# An Event's payload starts with the wall time (tag, 8 bytes), then the step (field 2, varint).
_STEP_AT = 9
_STEP_TAG = w.key(2, w.VARINT)
# (bytes before the wall time, bytes from after the step field up to the value, framed length)
_Layout = tuple[bytes, bytes, int]


class FloatSteps:
    """Writes one worker's float steps (``write``); not thread-safe (one writer uses it)."""

    def __init__(self, worker: str, clock: Callable[[], float] = time.time) -> None:
        self._worker = worker
        self._escaped = escape_worker(worker)
        self._clock = clock
        self._layouts: dict[tuple[str, int, int], _Layout] = {}
        self._json_names: dict[str, str] = {}
        self._meta_frames: dict[tuple[int, int], tuple[bytes, bytes] | None] = {}

    def keys(self, step: int) -> tuple[str, str]:
        """The step's events and index keys (as ``event_file_key``/``index_file_key`` spell them)."""
        if type(step) is not int or step < 0:
            return event_file_key(step, self._worker), index_file_key(step, self._worker)  # they raise
        return (f"events/{step:012d}/{step:012d}_{self._escaped}.tfevents",
                f"index/{step // 1000:09d}/{step:012d}_{self._escaped}.json")

    def write(
        self, store: ObjectStore, step: int, mode: ModeKeys, mode_step: int, items: Sequence[tuple[str, float]]
    ) -> tuple[str, bytes]:
        """Put the events file of ``items`` (Python floats: float64 records of shape [1]), then
        its index file; returns the index key and bytes (the step manifest keeps them)."""
        if not items:
            raise ValueError("a float step holds at least one tensor")  # StepWriter would write nothing
        if type(mode) is not ModeKeys:
            mode = ModeKeys(mode)
        # Cold after each boosting round, every Python frame costs: the cache hits below are
        # inline (keys, _metadata, _layout and _json_name are their general forms). mode._name_
        # and ._value_: Enum's name and value are properties (Python frames).
        if type(step) is not int or step < 0:
            event_key, index_key = self.keys(step)  # they raise
        else:
            escaped = self._escaped
            event_key = f"events/{step:012d}/{step:012d}_{escaped}.tfevents"
            index_key = f"index/{step // 1000:09d}/{step:012d}_{escaped}.json"
        clock, pack, footer = self._clock, _F64.pack, MAGIC_FOOTER_BYTES
        step_field = _STEP_TAG + w.encode_varint(step) if step else b""  # proto3 leaves 0 out
        digits = str(mode_step)
        frame = self._meta_frames.get((mode._value_, len(digits)))
        meta = frame[0] + digits.encode() + frame[1] if frame is not None else self._metadata(mode, mode_step)
        step_len, meta_len = len(step_field), len(meta)
        layouts, json_names = self._layouts, self._json_names
        pieces: list[bytes] = []
        rows: list[str] = []
        offset = 0
        for name, value in items:
            layout = layouts.get((name, step_len, meta_len))
            if layout is None:
                layout = self._layout(name, step_len, meta, step, mode, mode_step)
            pre, mid, length = layout
            pieces += (pre, pack(clock()), step_field, mid, pack(value), meta, footer)
            frag = json_names.get(name)
            if frag is None:
                frag = self._json_name(name)
            rows.append(f"{frag}{offset}, \"length\": {length}}}")
            offset += length
        store.put(event_key, b"".join(pieces))
        data = (f'{{"meta": {{"mode": "{mode._name_}", "mode_step": {int(mode_step)}, "event_file_name": '
                f'{_json_str(event_key)}}}, "tensor_payload": [{", ".join(rows)}], "shape_payload": []}}').encode()
        store.put(index_key, data)
        return index_key, data

    def _metadata(self, mode: ModeKeys, mode_step: int) -> bytes:
        """The step's plugin data (mode step, mode): the general encoder's, from a template of
        the bytes around the decimal mode step, learnt per (mode, number of digits)."""
        digits = str(mode_step)
        key = (mode._value_, len(digits))  # not the mode: its hash is a Python call
        frames = self._meta_frames
        if key not in frames:
            frames[key] = _meta_frame(mode, mode_step)
        frame = frames[key]
        if frame is None:  # no template (a negative mode step): the general encoder's
            return _general_metadata(mode, mode_step)
        return frame[0] + digits.encode() + frame[1]

    def _json_name(self, name: str) -> str:
        frag = self._json_names.get(name)
        if frag is None:
            if len(self._json_names) >= _MAX_LAYOUTS:
                self._json_names.clear()
            frag = self._json_names[name] = f'{{"tensorname": {_json_str(name)}, "start_idx": '
        return frag

    def _layout(self, name: str, step_len: int, meta: bytes, step: int, mode: ModeKeys, mode_step: int) -> _Layout:
        key = (name, step_len, len(meta))
        layout = self._layouts.get(key)
        if layout is None:
            # Learnt from the general encoder (a record of this step, wall time and value 0): the
            # pieces hold only the name, the tags and lengths, which the key fixes.
            parts = encode_tensor_event_parts(name, 0.0, step=step, mode=mode, mode_step=mode_step, wall_time=0.0)
            framed, framed_len = frame_parts(parts)
            payload = b"".join(parts)
            after_step = _STEP_AT + step_len
            layout = (bytes(framed[0]) + payload[:1], payload[after_step : len(payload) - len(meta) - 8], framed_len)
            if len(self._layouts) >= _MAX_LAYOUTS:
                self._layouts.clear()
            self._layouts[key] = layout
        return layout


def _general_metadata(mode: ModeKeys, mode_step: int) -> bytes:
    return bytes(encode_tensor_event_parts("m", 0.0, step=0, mode=mode, mode_step=mode_step, wall_time=0.0)[2])


def _meta_frame(mode: ModeKeys, mode_step: int) -> tuple[bytes, bytes] | None:
    """``(head, tail)`` with ``head + str(n).encode() + tail`` the plugin data of every mode step
    ``n >= 0`` with as many digits as ``mode_step``: the general encoder's bytes for two such mode
    steps whose digits all differ share exactly the bytes before and after the digits."""
    if mode_step < 0:
        return None
    digits = str(mode_step)
    other = "".join(str((int(c) + 1) % 10) for c in digits)
    if len(digits) > 1 and other[0] == "0":
        other = "1" + other[1:]
    a, b = _general_metadata(mode, mode_step), _general_metadata(mode, int(other))
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), None)
    if i is None:
        return None
    head, tail = a[:i], a[i + len(digits):]
    if head + digits.encode() + tail != a or head + other.encode() + tail != b:
        return None  # not the layout this expects: every step takes the general encoder
    return head, tail
