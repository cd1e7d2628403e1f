"""Every ledger id a Pulsar value names, rewritten through one table (old id -> new id):
what a restore under new ledger ids (``bkctl restore --remap``) changes so that a broker
loads the topic as before.

* ``ManagedLedgerInfo``: each ``ledgerInfo.ledgerId`` and the ``terminatedPosition``; a
  ledger that was open when it was backed up gets its ``entries`` and ``size`` (it is
  restored closed, as a broker's recovery leaves it);
* ``ManagedCursorInfo``: ``cursorsLedgerId``, the mark-delete position, each
  individually deleted range's endpoints, each partly acknowledged batch's position, and
  the ``CompactedTopicLedger`` property (a compaction's output ledger);
* ``PositionInfo`` (a cursor ledger's entries): the same, and the ``LongListMap`` keys;
* ``SchemaLocator`` and ``SchemaEntry`` (a schema ledger's entry): each index entry's ledger.

Ids not in the table (-1, a ledger that was already gone) stay as they are.  A value with
nothing to change is returned byte for byte (a compressed or text znode stays so).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from ..proto import pulsar_ml_pb2 as ml
from ..proto import pulsar_schema_pb2 as spb
from .managed_ledger import parse_cursor_info, parse_managed_ledger_info, parse_position_info

__all__ = [
    "COMPACTED_LEDGER_PROPERTY",
    "remap_cursor_info",
    "remap_managed_ledger_info",
    "remap_position_info",
    "remap_schema_entry",
    "remap_schema_locator",
]

#: the cursor property naming a topic compaction's output ledger (Pulsar's ``__compaction`` cursor)
COMPACTED_LEDGER_PROPERTY = "CompactedTopicLedger"


class _Positioned(Protocol):
    ledgerId: int


class _Remapper:
    def __init__(self, ids: Mapping[int, int]):
        self.ids = ids
        self.changed = False

    def new(self, ledger_id: int) -> int:
        new = self.ids.get(ledger_id, ledger_id)
        if new != ledger_id:
            self.changed = True
        return new

    def position(self, p: _Positioned) -> None:
        p.ledgerId = self.new(p.ledgerId)

    def ranges(self, ranges: Iterable[ml.MessageRange]) -> None:
        for r in ranges:
            self.position(r.lowerEndpoint)
            self.position(r.upperEndpoint)

    def batches(self, batches: Iterable[ml.BatchedEntryDeletionIndexInfo]) -> None:
        for b in batches:
            self.position(b.position)

    def properties(self, properties: Iterable[ml.LongProperty]) -> None:
        for prop in properties:
            if prop.name == COMPACTED_LEDGER_PROPERTY and prop.value >= 0:
                prop.value = self.new(prop.value)


def remap_managed_ledger_info(
    data: bytes, ids: Mapping[int, int], closed: Mapping[int, tuple[int, int]] | None = None
) -> bytes:
    """A ``ManagedLedgerInfo`` with its ledgers renamed; ``closed`` (old id -> entries,
    size) fills in the ledgers that were open (their ``entries`` unset)."""
    info = parse_managed_ledger_info(data)
    r = _Remapper(ids)
    for li in info.ledgerInfo:
        if closed and li.ledgerId in closed and not li.HasField("entries"):
            li.entries, li.size = closed[li.ledgerId]
            r.changed = True
        li.ledgerId = r.new(li.ledgerId)
    if info.HasField("terminatedPosition"):
        r.position(info.terminatedPosition)
    return info.SerializeToString() if r.changed else bytes(data)


def remap_cursor_info(data: bytes, ids: Mapping[int, int]) -> bytes:
    """A ``ManagedCursorInfo`` with every ledger it names renamed."""
    info = parse_cursor_info(data)
    r = _Remapper(ids)
    if info.cursorsLedgerId >= 0:
        info.cursorsLedgerId = r.new(info.cursorsLedgerId)
    if info.HasField("markDeleteLedgerId"):
        info.markDeleteLedgerId = r.new(info.markDeleteLedgerId)
    r.ranges(info.individualDeletedMessages)
    r.batches(info.batchedEntryDeletionIndexInfo)
    r.properties(info.properties)
    return info.SerializeToString() if r.changed else bytes(data)


def remap_position_info(data: bytes, ids: Mapping[int, int]) -> bytes:
    """A cursor ledger's ``PositionInfo`` entry with every ledger it names renamed."""
    pos = parse_position_info(data)
    r = _Remapper(ids)
    r.position(pos)
    r.ranges(pos.individualDeletedMessages)
    r.batches(pos.batchedEntryDeletionIndexInfo)
    r.properties(pos.properties)
    for m in pos.individualDeletedMessageRanges:
        m.key = r.new(m.key)
    return pos.SerializeToString() if r.changed else bytes(data)


def _index(r: _Remapper, entries: Iterable[spb.IndexEntry]) -> None:
    for e in entries:
        if e.position.ledgerId >= 0:
            r.position(e.position)


def remap_schema_locator(data: bytes, ids: Mapping[int, int]) -> bytes:
    """A ``SchemaLocator`` whose versions name their new ledgers."""
    locator = spb.SchemaLocator.FromString(bytes(data))
    r = _Remapper(ids)
    _index(r, [locator.info])
    _index(r, locator.index)
    return locator.SerializeToString() if r.changed else bytes(data)


def remap_schema_entry(data: bytes, ids: Mapping[int, int]) -> bytes:
    """A schema ledger's ``SchemaEntry`` whose index names the new ledgers."""
    entry = spb.SchemaEntry.FromString(bytes(data))
    r = _Remapper(ids)
    _index(r, entry.index)
    return entry.SerializeToString() if r.changed else bytes(data)
