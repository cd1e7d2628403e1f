"""Which bookies of a ledger are missing replicas (Java's ``LedgerChecker``).

A segment's copy on one bookie is *under-replicated* when that bookie is not
registered (neither writable nor read-only), or when it is registered but does
not have the segment's first or last entry it should hold (Java's default,
``auditorLedgerVerificationPercentage=0``, reads those two).  The last segment
of an open ledger is judged by registration only: its last entry is not known.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from twisted.internet import defer

from bkctl.wire.metadata.ledger import LedgerMetadata, write_set_indices

if TYPE_CHECKING:
    from collections.abc import Iterator

    from bkctl.wire.client.bookkeeper import BookKeeperClient
    from bkctl.wire.fsck.check import BookieRequests

__all__ = ["bookies_missing_replicas", "entries_held", "marked_copies_lacking", "replica_counts"]


def entries_held(md: LedgerMetadata, segment: int, position: int, last_entry_id: int) -> tuple[int, int] | None:
    """The first and last entry that ensemble ``position`` of ``segment`` holds,
    up to ``last_entry_id``; None when it holds none."""
    first = md.ensembles[segment][0]
    last = md.ensembles[segment + 1][0] - 1 if segment + 1 < len(md.ensembles) else last_entry_id
    if last < first:
        return None
    size, quorum = md.ensemble_size, md.write_quorum
    low = next(
        (e for e in range(first, min(last, first + size - 1) + 1) if position in write_set_indices(e, size, quorum)),
        None,
    )
    if low is None:
        return None
    high = next(
        e for e in range(last, max(first, last - size + 1) - 1, -1) if position in write_set_indices(e, size, quorum)
    )
    return low, high


async def bookies_missing_replicas(
    client: BookKeeperClient,
    ledger_id: int,
    md: LedgerMetadata,
    registered: Collection[str],
    lost_entries: Collection[int] = (),
) -> set[str]:
    """Bookies of ``md`` that lack replicas they should hold (see the module doc).
    ``lost_entries``: entries recorded with no good copy anywhere
    (:mod:`.lostentries`), never probed: a bookie lacking one is not short of a replica
    that can be made, and marking it would have the ledger moved at every audit."""
    registered = set(registered)
    missing: set[str] = set()
    probes: list[tuple[str, defer.Deferred[bool]]] = []
    last_entry = md.last_entry_id if md.is_closed else None
    for segment, (_first, ensemble) in enumerate(md.ensembles):
        open_tail = last_entry is None and segment == len(md.ensembles) - 1
        for position, bookie in enumerate(ensemble):
            if bookie not in registered:
                missing.add(bookie)
                continue
            if open_tail or bookie in missing:
                continue
            if last_entry is None:  # an earlier segment of an open ledger: complete up to the next start
                bound = md.ensembles[segment + 1][0] - 1
            else:
                bound = last_entry
            held = entries_held(md, segment, position, bound)
            if held is None:
                continue
            for entry_id in sorted(set(held)):
                if entry_id in lost_entries:
                    continue
                probes.append((bookie, _has_entry(client, bookie, ledger_id, entry_id)))
    for bookie, probe in probes:
        if not await probe:
            missing.add(bookie)
    return missing


def _has_entry(client: BookKeeperClient, bookie: str, ledger_id: int, entry_id: int) -> defer.Deferred[bool]:
    """True when ``bookie`` answers the entry; False when it says it has no such
    entry or ledger.  Other failures (timeouts, a refused connection) count as
    missing too: a replica that cannot be read is not a replica."""
    try:
        d = client.pool.get(bookie).read(ledger_id, entry_id)
    except Exception:  # noqa: BLE001
        return defer.succeed(False)

    answered: defer.Deferred[bool] = d.addCallbacks(lambda _body: True, lambda _failure: False)
    return answered


async def marked_copies_lacking(
    client: BookKeeperClient,
    ledger_id: int,
    md: LedgerMetadata,
    marked: Collection[str],
    window: int = 64,
    lost_entries: Collection[int] = (),
) -> set[str]:
    """Of the bookies a mark names (``marked``: registered, of a closed ledger), those that lack
    an entry their write sets give them (their GET_LIST_OF_ENTRIES_OF_LEDGER answer), or hold
    one whose digest does not verify (every such entry read): the whole check ``bkctl ledger
    fsck`` made before marking them, which the first-and-last check above does not see.
    ``lost_entries`` (recorded with no good copy anywhere) are left out."""
    from bkctl.wire.client.credentials import ledger_credentials
    from bkctl.wire.codecs.digest import DigestManager
    from bkctl.wire.fsck.check import BookieRequests

    lacking: set[str] = set()
    if not md.is_closed or md.last_entry_id < 0:
        return lacking
    requests = BookieRequests(client.pool, window)
    try:
        password, digest_type = ledger_credentials(ledger_id, md)
        digest: DigestManager | None = DigestManager(ledger_id, digest_type, password)
    except Exception:  # noqa: BLE001 - no credentials: held entries count as good
        digest = None
    for bookie in sorted(set(marked).intersection(md.bookies)):
        should = [e for e in range(md.last_entry_id + 1) if bookie in md.write_set(e) and e not in lost_entries]
        held = await requests.availability(bookie, ledger_id)
        if held is not None and any(e not in held for e in should):
            lacking.add(bookie)
            continue
        for start in range(0, len(should), window):
            reads = [
                (e, defer.ensureDeferred(requests.read(bookie, ledger_id, e))) for e in should[start : start + window]
            ]
            for entry_id, d in reads:
                try:
                    body = await d
                    if body is None:
                        raise LookupError("absent")
                    if digest is not None:
                        digest.verify(body, entry_id)
                except Exception:  # noqa: BLE001 - absent, unreadable or corrupt: lacking
                    lacking.add(bookie)
            if bookie in lacking:
                break
    return lacking


async def replica_counts(
    client: BookKeeperClient, ledger_id: int, md: LedgerMetadata, requests: BookieRequests | None = None
) -> dict[str, int]:
    """Java's replicas check for a closed ledger: ask each bookie which entries it
    holds (GET_LIST_OF_ENTRIES_OF_LEDGER) and count the entries stored on fewer
    than ``Qw`` / ``Qa`` bookies of their write set, and on none.  A bookie that
    does not answer the entry list has the entries it should hold read one by one
    (``requests``, shared over a whole check, asks it no more: Java 4.17.2's
    DbLedgerStorage leaves the request unanswered); one that answers neither is
    counted as holding nothing."""
    from bkctl.wire.fsck.check import BookieRequests, held_by

    counts = {"entries": 0, "below_write_quorum": 0, "below_ack_quorum": 0, "no_replica": 0}
    if not md.is_closed or md.last_entry_id < 0:
        return counts
    if requests is None:
        requests = BookieRequests(client.pool)
    last = md.last_entry_id

    def should(bookie: str) -> Iterator[int]:
        return (e for e in range(last + 1) if bookie in md.write_set(e))

    held = {bookie: (await held_by(requests, bookie, ledger_id, should(bookie)))[0] for bookie in md.bookies}
    for entry_id in range(last + 1):
        copies = sum(1 for b in md.write_set(entry_id) if entry_id in held[b])
        counts["entries"] += 1
        if copies < md.write_quorum:
            counts["below_write_quorum"] += 1
        if copies < md.ack_quorum:
            counts["below_ack_quorum"] += 1
        if copies == 0:
            counts["no_replica"] += 1
    return counts
