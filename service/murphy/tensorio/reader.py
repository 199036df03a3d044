"""Reading records back: one record by its index range (how the trial fetches values), or every
record of an events file (for tools and tests)."""

from __future__ import annotations

from collections.abc import Iterator

from murphy.core.collection import CollectionsDoc
from murphy.exceptions import TruncatedRecord
from murphy.storage.base import ObjectStore
from murphy.tensorio.events import TensorEvent, decode_events, decode_tensor_event
from murphy.tensorio.framing import iter_records, read_one
from murphy.tensorio.index import StepIndex


def read_tensor_record(store: ObjectStore, event_file_name: str, start_idx: int, length: int) -> TensorEvent:
    """Fetch ``length`` bytes at ``start_idx`` of an events file (a ranged GET) and decode them.

    Raises ``ObjectNotFound`` if the events file is missing (not yet synced), ``TruncatedRecord``
    if it is shorter than the range, ``CorruptRecord`` for damaged bytes.
    """
    data = store.get(event_file_name, start_idx, length)
    if len(data) < length:
        raise TruncatedRecord(f"{event_file_name}: wanted {length} bytes at {start_idx}, got {len(data)}")
    return decode_tensor_event(read_one(data))


def read_event_file(store: ObjectStore, key: str) -> Iterator[TensorEvent]:
    """Every tensor of an events file, in file order; a truncated last record is skipped."""
    for payload in iter_records(store.get(key)):
        yield from decode_events(payload)


def read_index(store: ObjectStore, key: str) -> StepIndex:
    """Parse one index file (``CorruptIndex`` on a torn or foreign file)."""
    return StepIndex.from_json_bytes(store.get(key))


def read_collections(store: ObjectStore, key: str) -> CollectionsDoc:
    """Parse one collections file (``CorruptCollections`` on bad input)."""
    return CollectionsDoc.from_json_bytes(store.get(key))
