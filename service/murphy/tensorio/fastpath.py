"""A fast path for decoding framed tensor records, for readers that decode many of them.

Records of one tensor at different steps are byte-identical except for the wall time, the step,
the mode step and the tensor content. :class:`RecordDecoder` therefore decodes the first record
of a ``(tensor, record length)`` pair with the generic decoder (:mod:`murphy.tensorio.events`)
and keeps a *template*: every byte from after the step field up to the tensor content. A later
record of that pair is decoded with a regex match over wall time and step, C-speed comparisons of
the template, the record header and the footer, and a dict lookup of its metadata bytes (mode,
mode step; parsed once per distinct bytes). The result is exactly the generic decoder's; any
difference at all (another layout, a real payload CRC, damage) falls back to the generic decoder,
which raises the usual errors.
"""

from __future__ import annotations

import re
import struct
from typing import Any

import numpy as np

from murphy.core.modes import ModeKeys
from murphy.exceptions import CorruptRecord
from murphy.tensorio import dtypes as d
from murphy.tensorio import wire as w
from murphy.tensorio.events import TensorEvent, decode_tensor_event, plugin_data, plugin_meta
from murphy.tensorio.framing import HEADER_SIZE, MAGIC_FOOTER_BYTES, read_one

MAX_TEMPLATES = 4096
MAX_SUFFIXES = 1 << 16

# wall_time (field 1, fixed64) then an optional step (field 2, varint of at most 10 bytes)
_PREFIX = re.compile(rb"\x09.{8}(?:\x10([\x80-\xff]{0,9}[\x00-\x7f]))?", re.S)
_F64 = struct.Struct("<d")
_U64_MASK = (1 << 64) - 1
_Meta = tuple[ModeKeys, "int | None", "str | None"]


class _Template:
    __slots__ = ("clen", "count", "cpos", "dtype", "head", "header", "hpos", "name", "native", "shape")

    def __init__(self, **kw: Any) -> None:
        for k, v in kw.items():
            setattr(self, k, v)
        self.hpos: int
        self.head: bytes
        self.cpos: int
        self.clen: int
        self.count: int
        self.header: bytes
        self.name: str
        self.dtype: np.dtype[Any]
        self.native: np.dtype[Any]
        self.shape: tuple[int, ...]


def _array(buf: bytes, start: int, t: _Template) -> np.ndarray[Any, Any]:
    """A writeable, native-order copy of the record's content (as the generic decoder makes)."""
    view: np.ndarray[Any, Any] = np.ndarray(t.shape, t.dtype, buf, start + t.cpos)
    return view.copy() if t.dtype == t.native else view.astype(t.native)


def _varint(raw: bytes) -> int:
    value = 0
    for i, b in enumerate(raw):
        value |= (b & 0x7F) << (7 * i)
    return w.to_int64(value & _U64_MASK)


class RecordDecoder:
    """Decodes framed tensor records like ``decode_tensor_event(read_one(record))``, faster when
    records repeat a layout. Not thread-safe; the caches are bounded."""

    def __init__(self) -> None:
        self._templates: dict[tuple[str, int], _Template | None] = {}
        self._suffixes: dict[bytes, _Meta] = {}

    def decode(self, buf: bytes | bytearray | memoryview, start: int, length: int, hint: str) -> TensorEvent:
        """The tensor of the framed record ``buf[start:start + length]``.

        ``hint`` groups records expected to share a layout (the tensor name); a wrong hint only
        costs speed. Raises like the generic decoder (``TruncatedRecord``, ``CorruptRecord``...).
        """
        t = self._templates.get((hint, length))
        if t is not None and type(buf) is bytes:
            m = self._match(buf, start, length, t)
            if m is not None:
                return self._event(buf, start, t, m)
        return self._generic(buf, start, length, hint, t)

    def value(self, buf: bytes | bytearray | memoryview, start: int, length: int, hint: str) -> np.ndarray[Any, Any]:
        """``decode(...).value``, without building the event on the fast path."""
        t = self._templates.get((hint, length))
        if t is not None and type(buf) is bytes and self._match(buf, start, length, t) is not None:
            return _array(buf, start, t)
        return self._generic(buf, start, length, hint, t).value

    def _generic(
        self, buf: bytes | bytearray | memoryview, start: int, length: int, hint: str, t: _Template | None
    ) -> TensorEvent:
        event = decode_tensor_event(read_one(memoryview(buf)[start : start + length]))
        # None marks a layout already found not to fit: don't pay for learning again.
        key = (hint, length)
        if type(buf) is bytes and start + length <= len(buf) and (t is not None or key not in self._templates):
            self._learn(buf, start, length, hint)
        return event

    def _match(self, buf: bytes, start: int, length: int, t: _Template) -> tuple[re.Match[bytes], _Meta] | None:
        """The prefix match and metadata if the record fits template ``t`` exactly, else None."""
        end = start + length - 4
        if start + length > len(buf) or not buf.startswith(t.header, start):
            return None
        m = _PREFIX.match(buf, start + HEADER_SIZE, end)
        if m is None:
            return None
        pos = m.end()
        if pos - start != t.hpos or not buf.startswith(t.head, pos) or not buf.startswith(MAGIC_FOOTER_BYTES, end):
            return None
        suffix = buf[start + t.cpos + t.clen : end]
        meta = self._suffixes.get(suffix)
        if meta is None:
            meta = _canonical_suffix(suffix) or self._parse_suffix(suffix)
            if meta is None:
                return None
        return m, meta

    def _event(self, buf: bytes, start: int, t: _Template, fit: tuple[re.Match[bytes], _Meta]) -> TensorEvent:
        m, (mode, mode_step, orig) = fit
        raw = m.group(1)
        step = 0 if raw is None else raw[0] if len(raw) == 1 else _varint(raw)
        arr = _array(buf, start, t)
        wall = float(_F64.unpack_from(buf, start + HEADER_SIZE + 1)[0])
        return TensorEvent(t.name, arr, step, mode, step if mode_step is None else mode_step, wall, orig)

    def _parse_suffix(self, suffix: bytes) -> _Meta | None:
        """Mode, mode step and original dtype of a value's trailing metadata fields."""
        view = memoryview(suffix)
        plugins: list[tuple[str, str]] = []
        try:
            for field, wt, a, b in w.iter_fields(view, 0, len(view)):
                if field != 9 or wt != w.LEN:
                    return None
                plugins.extend(plugin_data(view, a, b))
            mode, mode_step, orig = plugin_meta(plugins, "")
        except CorruptRecord:
            return None  # the generic decoder reports it with the tensor's name
        meta: _Meta = (mode, mode_step, orig or None)
        if len(self._suffixes) >= MAX_SUFFIXES:
            self._suffixes.clear()
        self._suffixes[suffix] = meta
        return meta

    def _learn(self, buf: bytes, start: int, length: int, hint: str) -> None:
        if len(self._templates) >= MAX_TEMPLATES:
            self._templates.clear()
        try:
            t = _build(buf, start, length)
        except CorruptRecord:
            t = None
        self._templates[(hint, length)] = t
        if t is not None and self._match(buf, start, length, t) is None:
            self._templates[(hint, length)] = None  # e.g. metadata the fast path won't take


# The metadata murphy's and smdebug's writers put after every value: plugin data "mode_step"
# (decimal) then "mode" (one digit). The mode step differs at every step, so the suffix cache
# misses on a scan over steps; this match reads it without the generic field walk. The length
# bytes are checked against the digits, so anything else goes to the generic parse.
_SUFFIX = re.compile(rb"J(.)\n(.)\n\tmode_step\x12(.)(0|-?[1-9][0-9]{0,18})\n\t\n\x04mode\x12\x01([0-9])", re.S)


def _canonical_suffix(suffix: bytes) -> _Meta | None:
    m = _SUFFIX.fullmatch(suffix)
    if m is None:
        return None
    digits = len(m.group(4))
    outer, first, content = m.group(1)[0], m.group(2)[0], m.group(3)[0]
    if content != digits or first != 13 + digits or outer != first + 13:
        return None
    try:
        return (ModeKeys(int(m.group(5))), int(m.group(4)), None)
    except ValueError:
        return None  # not a mode: the generic decoder reports it


def _build(buf: bytes, start: int, length: int) -> _Template | None:
    """The template of a record the generic decoder accepted, or None if it is not canonical:
    Event{wall_time, [step], summary{value{tag, tensor{..., tensor_content}, metadata...}}}."""
    end = start + length - 4
    m = _PREFIX.match(buf, start + HEADER_SIZE, end)
    if m is None or not buf.startswith(MAGIC_FOOTER_BYTES, end):
        return None
    view = memoryview(buf)
    top = w.iter_fields(view, m.end(), end)
    if len(top) != 1 or top[0][:2] != (5, w.LEN) or top[0][3] != end:
        return None
    values = w.iter_fields(view, top[0][2], end)
    if len(values) != 1 or values[0][:2] != (1, w.LEN) or values[0][3] != end:
        return None
    fields = w.iter_fields(view, values[0][2], end)
    if len(fields) < 2 or fields[0][:2] != (1, w.LEN) or fields[1][:2] != (8, w.LEN):
        return None
    t_a, t_b = fields[1][2], fields[1][3]
    tensor = w.iter_fields(view, t_a, t_b)
    if not tensor or tensor[-1][:2] != (4, w.LEN) or tensor[-1][3] != t_b or tensor[-1][2] == t_b:
        return None
    dts = [a for f, wt, a, _ in tensor if f == 1 and wt == w.VARINT]
    dt = dts[-1] if dts else d.DT_INVALID
    if dt in (d.DT_INVALID, d.DT_STRING, d.DT_BFLOAT16):
        return None
    event = decode_tensor_event(read_one(view[start : start + length]))
    c_a = tensor[-1][2]
    src = d.numpy_dtype_of(dt)
    if event.value.dtype.kind in "OSU" or src.itemsize * event.value.size != t_b - c_a:
        return None
    return _Template(
        hpos=m.end() - start, head=buf[m.end() : c_a], cpos=c_a - start, clen=t_b - c_a,
        count=event.value.size, header=buf[start : start + HEADER_SIZE], name=event.name,
        dtype=src, native=event.value.dtype, shape=event.value.shape,
    )
