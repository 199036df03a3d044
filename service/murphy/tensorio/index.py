"""Index files: one JSON object per (step, worker) naming every record of the step's events file.

    {"meta": {"mode": "TRAIN", "mode_step": 3, "event_file_name": "events/.../..._worker_0.tfevents"},
     "tensor_payload": [{"tensorname": "...", "start_idx": 0, "length": 260}, ...],
     "shape_payload":  [{"tensorname": "...", "originalname": "...", "shape": [8, 4]}]}

``start_idx``/``length`` cover the whole framed record (header, payload and footer).
``shape_payload`` is filled only when shapes were recorded; like smdebug 1.0.34 (verified
byte-for-byte) the key is always written, as ``[]`` when empty.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _json_str
from typing import Any

from murphy.core.modes import ModeKeys
from murphy.exceptions import CorruptIndex


@dataclass(frozen=True)
class IndexEntry:
    """Where one tensor's record lies in the step's events file."""

    tensorname: str
    start_idx: int
    length: int

    def to_json_dict(self) -> dict[str, Any]:
        return {"tensorname": self.tensorname, "start_idx": self.start_idx, "length": self.length}


@dataclass(frozen=True)
class ShapeEntry:
    """A tensor's shape, saved when ``ReductionConfig.save_shape`` is on."""

    tensorname: str
    originalname: str
    shape: tuple[int, ...]

    def to_json_dict(self) -> dict[str, Any]:
        return {"tensorname": self.tensorname, "originalname": self.originalname, "shape": list(self.shape)}


@dataclass
class StepIndex:
    """The index file of one (step, worker)."""

    mode: ModeKeys
    mode_step: int
    event_file_name: str
    tensors: list[IndexEntry] = field(default_factory=list)
    shapes: list[ShapeEntry] = field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        """The exact smdebug JSON object."""
        doc: dict[str, Any] = {
            "meta": {
                "mode": ModeKeys(self.mode).name,
                "mode_step": self.mode_step,
                "event_file_name": self.event_file_name,
            },
            "tensor_payload": [t.to_json_dict() for t in self.tensors],
            "shape_payload": [s.to_json_dict() for s in self.shapes],
        }
        return doc

    def to_json_bytes(self) -> bytes:
        """The file's bytes: exactly ``json.dumps(self.to_json_dict())`` (UTF-8).

        Formatted directly (a step writes one per saved step): json's own string escaping, the
        same separators and key order, no dict building and no encoder walk.
        """
        tensors = ", ".join(
            f'{{"tensorname": {_json_str(t.tensorname)}, "start_idx": {int(t.start_idx)}, "length": {int(t.length)}}}'
            for t in self.tensors
        )
        shapes = ", ".join(
            f'{{"tensorname": {_json_str(s.tensorname)}, "originalname": {_json_str(s.originalname)}, '
            f'"shape": [{", ".join(str(int(d)) for d in s.shape)}]}}'
            for s in self.shapes
        )
        return (
            f'{{"meta": {{"mode": {_json_str(ModeKeys(self.mode).name)}, "mode_step": {int(self.mode_step)}, '
            f'"event_file_name": {_json_str(self.event_file_name)}}}, "tensor_payload": [{tensors}], '
            f'"shape_payload": [{shapes}]}}'
        ).encode()

    @classmethod
    def from_json_bytes(cls, data: bytes) -> StepIndex:
        """Parse an index file; raises :class:`CorruptIndex` (torn write, wrong schema)."""
        try:
            doc = json.loads(data)
        except (UnicodeDecodeError, ValueError) as exc:
            raise CorruptIndex(f"index file is not valid JSON: {exc}") from exc
        return cls.from_json_dict(doc)

    @classmethod
    def from_json_dict(cls, doc: Any) -> StepIndex:
        """Validate and convert a parsed index object; raises :class:`CorruptIndex`."""
        if not isinstance(doc, dict):
            raise CorruptIndex("index file is not a JSON object")
        meta = doc.get("meta")
        if not isinstance(meta, dict) or not meta:
            raise CorruptIndex("index file has no 'meta' object")
        if "tensor_payload" not in doc and "shape_payload" not in doc:
            raise CorruptIndex("index file has neither 'tensor_payload' nor 'shape_payload'")
        mode_name = meta.get("mode")
        if not isinstance(mode_name, str) or mode_name not in ModeKeys.__members__:
            raise CorruptIndex(f"index meta has an invalid mode {mode_name!r}")
        # smdebug writes no event_file_name (or an empty one) when a step saved only shapes; it
        # reads the name only when tensor_payload has rows. "" stands for "no events file".
        event_file = meta.get("event_file_name", "")
        if not isinstance(event_file, str):
            raise CorruptIndex(f"index meta has an invalid event_file_name {event_file!r}")
        if "event_file_name" not in meta and doc.get("tensor_payload"):
            raise CorruptIndex("index meta has no event_file_name for its tensor_payload")
        return cls(
            mode=ModeKeys[mode_name],
            mode_step=_int(meta.get("mode_step"), "meta.mode_step"),
            event_file_name=event_file,
            tensors=[_index_entry(e) for e in _list(doc.get("tensor_payload"), "tensor_payload")],
            shapes=[_shape_entry(e) for e in _list(doc.get("shape_payload"), "shape_payload")],
        )


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise CorruptIndex(f"{what} is not a list")
    return value


def _int(value: Any, what: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CorruptIndex(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise CorruptIndex(f"{what} must be a string, got {value!r}")
    return value


def _index_entry(e: Any) -> IndexEntry:
    if not isinstance(e, dict):
        raise CorruptIndex("tensor_payload entry is not an object")
    return IndexEntry(
        tensorname=_str(e.get("tensorname"), "tensorname"),
        start_idx=_int(e.get("start_idx"), "start_idx"),
        length=_int(e.get("length"), "length", minimum=1),
    )


def _shape_entry(e: Any) -> ShapeEntry:
    if not isinstance(e, dict):
        raise CorruptIndex("shape_payload entry is not an object")
    name = _str(e.get("tensorname"), "tensorname")
    original = e.get("originalname", name)
    shape = e.get("shape")
    if not isinstance(shape, list):
        raise CorruptIndex(f"shape of {name!r} is not a list")
    return ShapeEntry(name, _str(original, "originalname"), tuple(_int(s, "shape dimension") for s in shape))


# --- fast bulk parsing for readers -----------------------------------------------------------

TensorRow = tuple[str, int, int]
"""``(tensorname, start_idx, length)`` of one ``tensor_payload`` entry."""


@dataclass(frozen=True, eq=False)
class IndexTable:
    """The validated ``tensor_payload`` and ``shape_payload`` of an index file.

    Index files of consecutive steps usually differ only in their ``meta`` (same tensors, same
    record sizes), so :class:`IndexParser` shares one table between files whose payload bytes
    are identical; readers may cache derived data per table (compare by identity).
    """

    tensors: tuple[TensorRow, ...]
    shapes: tuple[ShapeEntry, ...]
    end: int
    """``max(start_idx + length)`` over ``tensors`` (0 if none): a lower bound on the file size."""


@dataclass(frozen=True)
class ParsedIndex:
    """One index file as :class:`IndexParser` returns it."""

    mode: ModeKeys
    mode_step: int
    event_file_name: str
    table: IndexTable


# The exact prefix json.dumps writes (smdebug and murphy): meta strings without escapes, then the
# tensor_payload key. The rest of the file is parsed on its own (in the same JSON context), so
# two files with the same rest share one parse.
_CANONICAL_META = re.compile(
    rb'\{"meta": \{"mode": "([A-Z]{1,16})", "mode_step": (0|[1-9][0-9]{0,17}), '
    rb'"event_file_name": "([^"\\\x00-\x1f]+)"\}, "tensor_payload": '
)
_REST_PREFIX = b'{"tensor_payload": '
MAX_SHARED_TABLES = 64
_MODES = dict(ModeKeys.__members__)  # Enum.__members__ builds a new mapping on every access
MAX_SHARED_BYTES = 1 << 20


def _table_of(index: StepIndex) -> IndexTable:
    rows = tuple((e.tensorname, e.start_idx, e.length) for e in index.tensors)
    end = max((s + n for _, s, n in rows), default=0)
    return IndexTable(rows, tuple(index.shapes), end)


class IndexParser:
    """Parses index files like :meth:`StepIndex.from_json_bytes` (same validation, same
    :class:`CorruptIndex` errors), sharing the table of files whose payload bytes are equal.

    The cache is bounded (``MAX_SHARED_TABLES`` payloads of at most ``MAX_SHARED_BYTES``); a hit
    costs one regex match on the meta plus hashing and comparing the payload bytes.
    """

    def __init__(self) -> None:
        self._tables: dict[bytes, IndexTable] = {}

    def parse(self, data: bytes) -> ParsedIndex:
        """Parse one index file; raises :class:`CorruptIndex`."""
        m = _CANONICAL_META.match(data)
        if m is None:
            index = StepIndex.from_json_bytes(data)
            return ParsedIndex(index.mode, index.mode_step, index.event_file_name, _table_of(index))
        mode = _MODES.get(m.group(1).decode("ascii"))
        try:
            fname = m.group(3).decode("utf-8")
        except UnicodeDecodeError:
            mode = None
        rest = data[m.end():]
        table = self._tables.get(rest) if mode is not None else None
        if table is None and mode is not None:
            table = self._parse_rest(rest, m.group(1).decode("ascii"), int(m.group(2)), fname)
        if table is None or mode is None:  # unusual file: the generic path decides
            index = StepIndex.from_json_bytes(data)
            return ParsedIndex(index.mode, index.mode_step, index.event_file_name, _table_of(index))
        return ParsedIndex(mode, int(m.group(2)), fname, table)

    def _parse_rest(self, rest: bytes, mode: str, mode_step: int, fname: str) -> IndexTable | None:
        try:
            doc = json.loads(_REST_PREFIX + rest)
        except (UnicodeDecodeError, ValueError) as exc:
            raise CorruptIndex(f"index file is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict) or "meta" in doc:
            return None  # a second "meta" key wins in json.loads
        meta = {"mode": mode, "mode_step": mode_step, "event_file_name": fname}
        table = _table_of(StepIndex.from_json_dict({"meta": meta, **doc}))
        if len(rest) <= MAX_SHARED_BYTES:
            if len(self._tables) >= MAX_SHARED_TABLES:
                del self._tables[next(iter(self._tables))]
            self._tables[rest] = table
        return table
