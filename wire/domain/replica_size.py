"""The one rule for how many bytes a bookie holds of a ledger.

``disk``'s attribution, the survey ``rebalance``/``drain`` plan from, its placement fix and what
``recover``/``decommission`` say they move all count with :func:`replica_bytes` (they were three
rules, and ``rebalance --dry-run`` disagreed with ``disk``).  It stands apart from
:mod:`.disk_attribution` because the client's fragment walk counts with it too, and that module
reads the client's write-set rule: here nothing of the client is imported, so neither waits on the
other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ..metadata.ledger import LedgerMetadata

__all__ = ["LedgerEnd", "packed_entry_bytes", "replica_bytes"]


class LedgerEnd(NamedTuple):
    """An open ledger's end as its bookies tell it: its last entry (-1: none) and its length so far."""

    last_entry_id: int
    length: int


def packed_entry_bytes(md: LedgerMetadata) -> int:
    """What the client packs around each payload: the entry header and the digest."""
    from ..codecs.digest import DIGEST_LENGTH, DigestType
    from ..codecs.protocol import ENTRY_HEADER_LENGTH

    return ENTRY_HEADER_LENGTH + DIGEST_LENGTH[md.digest_type or DigestType.CRC32]


def replica_bytes(md: LedgerMetadata, entries: int, end: LedgerEnd | None = None) -> int:
    """The one rule for how many bytes a bookie holds of a ledger, which ``disk``, ``rebalance``,
    ``drain``, ``recover`` and ``decommission`` all count with: ``entries`` stored entries at the
    ledger's mean payload -- its length over its entries -- plus the header and digest the client
    packs around each (:func:`packed_entry_bytes`).  A closed ledger's length and last entry are
    its metadata's; an open one's are ``end``'s (what its bookies tell); 0 when neither is known."""
    if end is None:
        if not md.is_closed:
            return 0
        end = LedgerEnd(md.last_entry_id, md.length)
    count = end.last_entry_id + 1
    if count <= 0 or entries <= 0:
        return 0
    return entries * end.length // count + entries * packed_entry_bytes(md)
