"""Bytes held twice: ledgers Pulsar offloaded to tiered storage and still keeps on the bookies.

A broker deletes a ledger's BookKeeper copy only once ``managedLedgerOffloadDeletionLagMs``
(4 h by default) has passed since the offload completed, and only when it next trims the
managed ledger (tests/vectors/offload/FACTS.md #21); a broker that stopped trimming, or a
namespace with a long lag, keeps paying for both copies.  ``bkctl disk`` adds this section beside
its attribution of the bookies' space (a module of its own: the walk of :mod:`.disk` reads
ledger metadata, this reads the managed ledgers' offload contexts).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bkctl.wire.domain.disk_attribution import packed_entry_bytes
from bkctl.wire.domain.topic_state import metadata_in_batches
from bkctl.wire.domain.topic_state import topic_reader as reader
from bkctl.wire.pulsar.offload_store import location_of

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore

__all__ = ["DEFAULT_DELETION_LAG", "held_twice"]

#: Pulsar's managedLedgerOffloadDeletionLagMs default, in seconds
DEFAULT_DELETION_LAG = 4 * 3600.0
#: ledgers named in the report (the count and bytes cover them all)
_NAMED = 20


@dataclass(frozen=True)
class HeldTwice:
    """``bkctl disk``'s ``offloaded_twice``: the ledgers offloaded more than the deletion lag ago
    whose BookKeeper copy is still there: how many, their bytes, every copy's bytes, the first ids."""

    ledgers: int
    length_bytes: int
    stored_bytes: int
    deletion_lag_seconds: float
    ledger_ids: list[int]


def held_twice(
    store: MetadataStore, base: str | None = None, lag: float = DEFAULT_DELETION_LAG, now: float | None = None
) -> HeldTwice:
    """The ledgers whose offload completed more than ``lag`` seconds ago and whose BookKeeper copy
    is still there: how many, their bytes (``length_bytes``, and ``stored_bytes``: every copy the
    bookies keep, by each ledger's write quorum), the first few ids."""
    cutoff_ms = ((time.time() if now is None else now) - lag) * 1000
    candidates: list[Any] = []
    topics = reader(store, base)
    for ml in topics.read_all(topics.topics(), cursors=False):
        for li in ml.info.ledgerInfo:
            location = location_of(li, ml.name)
            if location is None or not location.complete or location.bookkeeper_deleted:
                continue
            if location.timestamp is not None and location.timestamp > cutoff_ms:
                continue
            candidates.append(li.ledgerId)
    ledgers, length, stored = 0, 0, 0
    named: list[int] = []
    for ledger_id, md in zip(candidates, metadata_in_batches(store, candidates)):
        if md is None or not md.is_closed:
            continue  # the copy is gone after all
        ledgers += 1
        length += md.length
        stored += (md.length + (md.last_entry_id + 1) * packed_entry_bytes(md)) * md.write_quorum
        if len(named) < _NAMED:
            named.append(ledger_id)
    return HeldTwice(ledgers, length, stored, lag, named)


def summary_part(doc: HeldTwice) -> str | None:
    """The clause ``bkctl disk``'s first line gets (None: nothing is held twice)."""
    from ..humanize import human_size, plural

    if not doc.ledgers:
        return None
    return (
        f"{human_size(doc.stored_bytes)} on the bookies is {plural(doc.ledgers, 'ledger')} also offloaded to "
        f"tiered storage more than {doc.deletion_lag_seconds / 3600:g} h ago (held twice: "
        "`bkctl pulsar offload list`)"
    )
