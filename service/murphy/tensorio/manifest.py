"""The step manifest: index files packed in segments, so a reader opens a long trial in a few GETs.

smdebug's layout has one index file per (step, worker); a reader learns a step's tensors only by
fetching that file, so opening a finished 1,000-step trial on S3 costs 1,000 GETs. murphy's hook
also packs every ``SEGMENT_FILES`` index files it writes into one *segment* object, under a prefix
no smdebug reader lists::

    murphy-manifest/index/<worker>/<first step:012d>_<last step:012d>.seg

``<worker>`` is spelled as in the index file names (:func:`~murphy.tensorio.locations.escape_worker`).
A segment holds the index files' exact bytes, so a reader that parses a segment's entries gets
exactly what it would have parsed from the files. It never *decides* anything from a segment:
which steps exist still comes from listing ``index/`` (one LIST per 1,000 keys); the manifest
only replaces the GETs of files it holds. A torn, corrupt or missing segment, or one that lacks a
listed key, costs the GETs it would have saved and nothing else.

Encoding (docs/format.md, "The step manifest")::

    b"MRPHMAN1" | u32 header length | header (JSON, UTF-8) | payload (zlib) | u32 CRC-32 of all before

The header is ``{"worker", "first_step", "last_step", "entries": [[key, length, crc32], ...]}``;
the payload, once inflated, is the entries' bytes in order. CRC-32 is zlib's (the manifest is
murphy's own; TFRecord's CRC-32C is not needed here and is slow in pure Python).
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
import zlib
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

from murphy.exceptions import ObjectNotFound
from murphy.storage.base import ObjectStore
from murphy.tensorio.locations import escape_worker

log = logging.getLogger(__name__)

MANIFEST_PREFIX = "murphy-manifest/index/"
SEGMENT_FILES = 100
"""Index files per segment: a finished 1,000-step trial is 10 GETs (sent together), and a live
trial's open tail, read file by file as before, is at most 99 files."""
MAGIC = b"MRPHMAN1"
_U32 = struct.Struct("<I")
_SEGMENT_RE = re.compile(r"^murphy-manifest/index/([^/]+)/(\d{12})_(\d{12})\.seg$")
_INDEX_NAME_RE = re.compile(r"(?:^|/)index/\d+/\d+_(.+)\.json$")


MANIFEST_ENV = "MURPHY_STEP_MANIFEST"


def manifest_enabled() -> bool:
    """Hooks write the manifest unless ``MURPHY_STEP_MANIFEST=0`` (read when a hook starts)."""
    return os.environ.get(MANIFEST_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class CorruptSegment(ValueError):
    """A segment object that does not decode (torn, damaged, or not a segment)."""


@dataclass(frozen=True)
class SegmentName:
    """What a segment's key says: whose index files, and which steps."""

    key: str
    worker: str  # escaped, as in index file names
    first_step: int
    last_step: int


def segment_key(worker: str, first_step: int, last_step: int) -> str:
    """``murphy-manifest/index/worker_0/000000000000_000000000099.seg``."""
    return f"{MANIFEST_PREFIX}{escape_worker(worker)}/{first_step:012d}_{last_step:012d}.seg"


def parse_segment_key(key: str) -> SegmentName | None:
    """The :class:`SegmentName` of a manifest key, or None for any other key."""
    m = _SEGMENT_RE.match(key)
    if m is None:
        return None
    return SegmentName(key, m.group(1), int(m.group(2)), int(m.group(3)))


def index_key_worker(key: str) -> str | None:
    """The escaped worker part of an index key (``index/000000000/000000000005_worker_0.json``)."""
    m = _INDEX_NAME_RE.search(key)
    return m.group(1) if m else None


def encode_segment(worker: str, entries: list[tuple[str, int, bytes]]) -> bytes:
    """A segment holding ``entries`` = ``[(index key, step, index file bytes), ...]``."""
    if not entries:
        raise ValueError("a segment holds at least one index file")
    steps = [step for _, step, _ in entries]
    header = {
        "worker": worker,
        "first_step": min(steps),
        "last_step": max(steps),
        "entries": [[key, len(data), zlib.crc32(data)] for key, _, data in entries],
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    body = MAGIC + _U32.pack(len(head)) + head + _deflate(b"".join(d for _, _, d in entries))
    return body + _U32.pack(zlib.crc32(body))


def _deflate(payload: bytes) -> bytes:
    """zlib level 1, with a window (and hash table) no larger than the payload needs.

    Level 1: index JSON is repetitive (50 tensors' names and offsets), so even the fastest level
    shrinks it ~8x, and the hook's writer thread pays ~1 ms per segment, not ~10. zlib's default
    state is ~256 KiB, which a short segment (an XGBoost run's ten index files, ~2 KB) pays for
    in fresh pages (~50 us at close() against ~11 us): a window of at least the payload finds
    every match the full one would, and ``zlib.decompress`` reads any window size. Payloads of
    16 KiB and more get zlib's defaults (the same bytes as ``zlib.compress(payload, 1)``).
    """
    wbits = max(9, min(zlib.MAX_WBITS, len(payload).bit_length()))
    deflate = zlib.compressobj(1, zlib.DEFLATED, wbits, max(1, min(zlib.DEF_MEM_LEVEL, wbits - 7)))
    return deflate.compress(payload) + deflate.flush()


def decode_segment(data: bytes) -> dict[str, bytes]:
    """``{index key: index file bytes}`` of a segment; raises :class:`CorruptSegment`."""
    if len(data) < len(MAGIC) + 8 or not data.startswith(MAGIC):
        raise CorruptSegment("not a murphy manifest segment")
    (crc,) = _U32.unpack_from(data, len(data) - 4)
    if zlib.crc32(memoryview(data)[:-4]) != crc:
        raise CorruptSegment("checksum mismatch (torn or damaged)")
    (head_len,) = _U32.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(data[start : start + head_len])
        payload = zlib.decompress(data[start + head_len : -4])
        out: dict[str, bytes] = {}
        offset = 0
        for key, length, entry_crc in header["entries"]:
            chunk = payload[offset : offset + length]
            offset += length
            if len(chunk) != length or zlib.crc32(chunk) != entry_crc:
                raise CorruptSegment(f"entry {key!r} does not match its checksum")
            out[str(key)] = chunk
    except CorruptSegment:
        raise
    except (ValueError, KeyError, TypeError, zlib.error) as exc:
        raise CorruptSegment(f"undecodable segment: {exc}") from exc
    if offset != len(payload):
        raise CorruptSegment("payload is longer than its entries")
    return out


class ManifestWriter:
    """Packs one worker's index files into segments as the hook writes them (one thread).

    A failure to write a segment is logged once and turns the manifest off for this writer: the
    index files are already written, so readers fall back to them and no tensor is lost.
    """

    def __init__(self, store: ObjectStore, worker: str, segment_files: int = SEGMENT_FILES) -> None:
        self._store = store
        self._worker = worker
        self._size = max(1, segment_files)
        self._pending: list[tuple[str, int, bytes]] = []
        self._begun = False
        self.enabled = True
        self.segments_written = 0

    def begin(self) -> None:
        """Delete this worker's segments left by an earlier run in the same ``out_dir``.

        Called before the first index file is written: from then on every segment of this worker
        describes index files of this run, so a reused directory (which smdebug refuses) can never
        pair a rewritten index file with a stale segment.
        """
        if self._begun or not self.enabled:
            return
        self._begun = True
        try:
            for key in list(self._store.list(f"{MANIFEST_PREFIX}{escape_worker(self._worker)}/")):
                self._store.delete(key)
        except ObjectNotFound:
            pass  # no bucket yet: nothing stale
        except Exception as exc:
            self._disable(exc)

    def add(self, index_key: str, step: int, data: bytes) -> None:
        """Record one index file just written; puts a segment once ``segment_files`` are held."""
        if not self.enabled:
            return
        self._pending.append((index_key, step, data))
        if len(self._pending) >= self._size:
            self.flush()

    def flush(self) -> None:
        """Put what is held as a segment (at the end of training, the last, shorter one)."""
        if not self.enabled or not self._pending:
            return
        entries, self._pending = self._pending, []
        steps = [s for _, s, _ in entries]
        try:
            self._store.put(segment_key(self._worker, min(steps), max(steps)), encode_segment(self._worker, entries))
        except Exception as exc:  # any store error: the index files already hold everything
            self._disable(exc)
            return
        self.segments_written += 1

    def _disable(self, exc: Exception) -> None:
        self.enabled = False
        self._pending = []
        log.warning("murphy hook: step manifest disabled (readers use the index files): %s", exc)


class ManifestReader:
    """Finds, for index keys a reader is about to GET, the ones a segment already holds."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._done: set[str] = set()  # segment keys fetched (or given up on): never fetched again

    def segments(self) -> list[SegmentName]:
        """Segments not fetched yet: one LIST of the manifest prefix (per 1,000 segments)."""
        try:
            names = (parse_segment_key(k) for k in self._store.list(MANIFEST_PREFIX))
            return [n for n in names if n is not None and n.key not in self._done]
        except ObjectNotFound:
            return []

    def lookup(self, wanted: Iterable[tuple[str, int, str]], segments: list[SegmentName]) -> dict[str, bytes]:
        """``{index key: bytes}`` for the wanted ``(key, step, worker)`` that ``segments`` hold.

        One GET per segment covering a wanted step (sent together on stores with ``get_many``).
        Keys not returned are the caller's to fetch.
        """
        by_worker: dict[str, list[int]] = {}
        keys: set[str] = set()
        for key, step, _ in wanted:
            w = index_key_worker(key)
            if w is not None:
                by_worker.setdefault(w, []).append(step)
                keys.add(key)
        for steps in by_worker.values():
            steps.sort()
        chosen = [
            s for s in segments if s.key not in self._done and s.worker in by_worker and _covers(s, by_worker[s.worker])
        ]
        found: dict[str, bytes] = {}
        if not chosen:
            return found
        for seg, data in zip(chosen, self._fetch([s.key for s in chosen]), strict=True):
            self._done.add(seg.key)
            if data is None:
                continue
            try:
                entries = decode_segment(data)
            except CorruptSegment as exc:
                log.warning("ignoring step manifest segment %s (reading its index files): %s", seg.key, exc)
                continue
            found.update((k, v) for k, v in entries.items() if k in keys)
        return found

    def _fetch(self, keys: list[str]) -> list[bytes | None]:
        get_many = getattr(self._store, "get_many", None)
        if callable(get_many) and len(keys) > 1:
            return [data for _, data in get_many(keys)]
        out: list[bytes | None] = []
        for key in keys:
            try:
                out.append(self._store.get(key))
            except ObjectNotFound:
                out.append(None)
        return out


def _covers(seg: SegmentName, sorted_steps: list[int]) -> bool:
    i = bisect_left(sorted_steps, seg.first_step)
    return i < len(sorted_steps) and sorted_steps[i] <= seg.last_step
