"""Per-index-table views: which tensors an index file holds, folded by base name.

Index files of consecutive steps usually share one :class:`~murphy.tensorio.index.IndexTable`
(same tensors, same record sizes), so the trial derives a :class:`TableView` once per table
instead of doing per-entry work for every step; a step then only records ``(events file, view)``
per worker.
"""

from __future__ import annotations

from murphy.tensorio.index import IndexTable
from murphy.tensorio.locations import parse_reduction_name

Span = tuple[int, int]
"""``(start_idx, length)`` of one framed record inside the step's events file."""


class Slot:
    """What one index file holds of one tensor: its raw record, stored reductions, saved shape."""

    __slots__ = ("reductions", "shape", "span")

    def __init__(self) -> None:
        self.span: Span | None = None
        self.reductions: dict[tuple[str, bool], Span] | None = None
        self.shape: tuple[int, ...] | None = None


class TableView:
    """The tensors of one index table, by base name (reductions folded in)."""

    __slots__ = ("names", "original_names", "slots", "table")

    def __init__(self, table: IndexTable) -> None:
        self.table = table
        slots: dict[str, Slot] = {}
        for name, start, length in table.tensors:
            red = parse_reduction_name(name)
            if red is None:
                slot = slots.get(name)
                if slot is None:
                    slot = slots[name] = Slot()
                slot.span = (start, length)
                continue
            base, op, abs_ = red
            slot = slots.get(base)
            if slot is None:
                slot = slots[base] = Slot()
            if slot.reductions is None:
                slot.reductions = {}
            slot.reductions[(op, abs_)] = (start, length)
        originals: list[tuple[str, str]] = []
        for shape in table.shapes:
            slot = slots.get(shape.tensorname)
            if slot is None:
                slot = slots[shape.tensorname] = Slot()
            slot.shape = tuple(shape.shape)
            if shape.originalname:
                originals.append((shape.tensorname, shape.originalname))
        self.slots = slots
        self.names = frozenset(slots)
        self.original_names = tuple(originals)
