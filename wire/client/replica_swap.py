"""The two steps around a replica's copy that every command changing where a copy lives shares
(``bkctl recover``, ``decommission``, ``rebalance``, ``drain``, ``ledger fsck --fix ensemble``,
``bookie replace-id`` and the autorecovery workers): the ledger's replication lock, taken before
the copy and released after, and the one compare-and-set that swaps the bookies in the metadata
(:func:`swap_bookies`).  The copy between them is
:func:`~bkctl.wire.client.rereplication.replicate_fragment`'s.

Why one module: each command had its own swap (four, with 100, 50, 10 and 1 attempts and as
many rules for what a concurrent write means), and ``recover`` and ``decommission`` copied
without the lock, so that a replication worker could copy the same ledger meanwhile.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bkctl.wire.metadata.errors import MetadataStoreError, MetadataVersionConflict, NoSuchLedger
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.metadata.store import MetadataStore

__all__ = [
    "MAX_ATTEMPTS",
    "Swap",
    "default_holder",
    "SwapOutcome",
    "SwapResult",
    "lock_replica",
    "release_replica",
    "swap_bookies",
]

#: writes tried before a ledger whose metadata keeps changing is left (each after a conflict)
MAX_ATTEMPTS = 25


@dataclass(frozen=True)
class Swap:
    """``old`` gives its place to ``new`` in the segment from ``first_entry_id``."""

    first_entry_id: int
    old: str
    new: str


class SwapOutcome(enum.Enum):
    SWAPPED = "swapped"
    #: every segment shows its swap done already (an earlier run): nothing written
    DONE = "done"
    #: a swapped segment is not as the copy saw it: nothing written
    CONFLICT = "conflict"
    #: the ledger was deleted
    GONE = "gone"


@dataclass(frozen=True)
class SwapResult:
    outcome: SwapOutcome
    #: the metadata and version now stored (None when gone)
    metadata: LedgerMetadata | None
    version: int
    #: why, for a conflict
    reason: str | None = None


def _segments(md: LedgerMetadata) -> dict[int, tuple[int | None, tuple[str, ...]]]:
    return {first: (last, tuple(ensemble)) for first, last, ensemble in md.segment_ranges()}


def _apply(
    md: LedgerMetadata, swaps: Sequence[Swap], seen: Mapping[int, tuple[int | None, tuple[str, ...]]]
) -> tuple[LedgerMetadata | None, str | None]:
    """``md`` with ``swaps`` made: None and why when a swapped segment is not as ``seen``; ``md``
    itself when every one shows its swap made already."""
    now = _segments(md)
    out = md
    for first in dict.fromkeys(s.first_entry_id for s in swaps):
        seen_last, seen_ensemble = seen[first]
        # a bookie the segment did not name when read was replaced before (an earlier run)
        mine = {s.old: s.new for s in swaps if s.first_entry_id == first and s.old in seen_ensemble}
        found = now.get(first)
        if found is None:
            return None, f"no segment starts at entry {first} any more"
        last, ensemble = found
        if seen_last is not None and last != seen_last:
            return None, f"its segment from entry {first} ends elsewhere now"
        if ensemble == tuple(mine.get(b, b) for b in seen_ensemble):
            continue  # made already
        if ensemble != seen_ensemble:
            joined = [new for old, new in mine.items() if new in ensemble and new != old]
            if joined:
                return None, f"{joined[0]} joined its segment from entry {first} meanwhile"
            return None, f"its segment from entry {first} changed meanwhile"
        for old, new in mine.items():
            if old != new:
                out = out.replace_bookie(first, old, new)
    return out, None


def swap_bookies(
    store: MetadataStore,
    ledger_id: int,
    swaps: Sequence[Swap],
    *,
    known: tuple[LedgerMetadata, int] | None = None,
    unlock: bool = False,
) -> SwapResult:
    """Swap the bookies of ``swaps`` in ledger ``ledger_id``'s metadata by compare-and-set
    (blocking: the store's calls).

    The one rule, for every caller: the metadata the copy was made from (``known``, else
    read now) is what each swapped segment must still be -- the same ensemble and the same
    end (an end not known then, an open last segment's, may have come since).  The swaps are written at the version read; on a version conflict the stored
    metadata is taken from the conflict and the same swaps applied to it again, at most
    :data:`MAX_ATTEMPTS` writes in all.  A concurrent write that leaves the swapped segments
    as they were (a writer's new segment or its close, another segment's swap, a fence) is
    retried so; one that changed a swapped segment otherwise (its end, a member, the new
    bookie joined it, the segment gone) leaves the ledger unwritten: ``CONFLICT`` with why
    (the copies made are garbage its bookies collect).  A segment that already shows its
    swap is left (``DONE`` when all do: a rerun), a deleted ledger is ``GONE``.
    ``unlock``: the ledger's replication lock, held by this store, goes in the same write
    (:meth:`~bkctl.wire.metadata.store.LedgerManager.update`); a lock gone already (the
    session lost) is a ``CONFLICT``, nothing written.  Metadata that keeps changing is a
    ``CONFLICT`` too."""
    if known is None:
        try:
            known = store.ledgers.read(ledger_id)
        except NoSuchLedger:
            return SwapResult(SwapOutcome.GONE, None, -1)
    md, version = known
    seen = _segments(md)
    missing = [s.first_entry_id for s in swaps if s.first_entry_id not in seen]
    if missing:
        return SwapResult(SwapOutcome.CONFLICT, md, version, f"no segment starts at entry {missing[0]}")
    for _attempt in range(MAX_ATTEMPTS):
        new, why = _apply(md, swaps, seen)
        if new is None:
            return SwapResult(SwapOutcome.CONFLICT, md, version, why)
        if new is md:
            return SwapResult(SwapOutcome.DONE, md, version)
        try:
            if unlock:
                version = store.ledgers.update(ledger_id, new, version, unlock=True)
            else:
                version = store.ledgers.update(ledger_id, new, version)
            return SwapResult(SwapOutcome.SWAPPED, new, version)
        except NoSuchLedger:
            return SwapResult(SwapOutcome.GONE, None, -1)
        except MetadataVersionConflict as conflict:
            md, version = conflict.metadata, conflict.current_version
        except MetadataStoreError as exc:
            if not unlock:
                raise
            return SwapResult(SwapOutcome.CONFLICT, md, version, f"its replication lock went: {exc}")
    return SwapResult(SwapOutcome.CONFLICT, md, version, f"its metadata kept changing ({MAX_ATTEMPTS} writes tried)")


def default_holder() -> str:
    """The name a bkctl process's replication locks show (``autorecovery status`` lists lock holders)."""
    import socket

    return f"bkctl-move@{socket.gethostname()}"


def lock_replica(store: MetadataStore, ledger_id: int, holder: str) -> str | None:
    """Take ledger ``ledger_id``'s replication lock as ``holder`` (blocking): None once taken,
    else who holds it -- a replication worker (Java's or bookied's) or another move; the
    caller leaves the ledger then, rather than copy it beside them."""
    if store.underreplication.lock(ledger_id, holder):
        return None
    return store.underreplication.lock_holder(ledger_id) or "another process"


def release_replica(store: MetadataStore, ledger_id: int) -> None:
    """Release the lock :func:`lock_replica` took (quietly: it is ephemeral, and goes with the
    session anyway)."""
    try:
        store.underreplication.release(ledger_id)
    except Exception:  # noqa: BLE001 - ZooKeeper gone: the lock goes with the session
        pass
