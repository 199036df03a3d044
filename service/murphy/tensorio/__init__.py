"""The smdebug on-disk format: layout and naming (:mod:`.locations`), TFRecord framing
(:mod:`.framing`), the Event protobuf codec (:mod:`.events`, :mod:`.dtypes`), index files
(:mod:`.index`), the per-step writer (:mod:`.writer`) and the record reader (:mod:`.reader`).

Imports only numpy and the standard library; no protobuf (see ``docs/format.md``).
"""

from __future__ import annotations

from murphy.tensorio.events import (
    TensorEvent,
    decode_events,
    decode_tensor_event,
    encode_tensor_event,
)
from murphy.tensorio.framing import frame, iter_records, read_one
from murphy.tensorio.index import IndexEntry, ShapeEntry, StepIndex
from murphy.tensorio.locations import (
    COLLECTIONS_PREFIX,
    END_OF_TRAINING_KEY,
    INDEX_PREFIX,
    collections_file_key,
    event_file_key,
    index_file_key,
    parse_index_key,
    parse_reduction_name,
    reduction_tensor_name,
    worker_from_collections_key,
)
from murphy.tensorio.reader import read_collections, read_event_file, read_index, read_tensor_record
from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training

__all__ = [
    "COLLECTIONS_PREFIX",
    "END_OF_TRAINING_KEY",
    "INDEX_PREFIX",
    "IndexEntry",
    "ShapeEntry",
    "StepIndex",
    "StepWriter",
    "TensorEvent",
    "collections_file_key",
    "decode_events",
    "decode_tensor_event",
    "encode_tensor_event",
    "event_file_key",
    "frame",
    "index_file_key",
    "iter_records",
    "parse_index_key",
    "parse_reduction_name",
    "read_collections",
    "read_event_file",
    "read_index",
    "read_one",
    "read_tensor_record",
    "reduction_tensor_name",
    "worker_from_collections_key",
    "write_collections",
    "write_end_of_training",
]
