"""What re-replication copies, worked out from a ledger's metadata alone (pure, no I/O): the
*fragments* on lost bookies (entries ``first..last`` of one segment whose ensemble holds one),
the entries each lost bookie held of them, and the bookies that take their place.  Apart from the
copying (:mod:`.rereplication`) because a plan needs none of it: ``bkctl recover --dry-run``, the
auditor and ``bkctl bookie disk`` count what lost bookies held of a million ledgers from the walk.

Entry ``e`` of a segment has its copies on ensemble positions ``(e + i) mod E`` for ``i < Qw``
(:class:`~bkctl.wire.client.quorum.QuorumSchedule`); a lost bookie at position ``p`` held exactly
the entries whose write set contains ``p`` (:meth:`Fragment.entries`, :meth:`Fragment.entry_count`).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

from bkctl.wire.metadata.ledger import LedgerMetadata

from .errors import TargetUnusable
from .placement import RandomPlacement
from .quorum import QuorumSchedule

__all__ = ["Fragment", "bytes_held", "choose_replacements", "entries_by_bookie", "fragments_to_rereplicate"]


def _holding_residues(positions: Collection[int], schedule: QuorumSchedule) -> frozenset[int]:
    """Residues ``r`` (mod E) of the entries that have a copy on one of ``positions``."""
    return _residues_holding(frozenset(positions), schedule.ensemble_size, schedule.write_quorum)


@functools.lru_cache(maxsize=4096)
def _residues_holding(positions: frozenset[int], ensemble_size: int, write_quorum: int) -> frozenset[int]:
    # The same few (positions, E, Qw) come back for every ledger of a walk (`disk` counts
    # each bookie's copies of a million ledgers): a stripe's write sets are worked out once.
    stripe = QuorumSchedule(ensemble_size, write_quorum).stripe()
    return frozenset(r for r, ws in enumerate(stripe) if any(i in positions for i in ws))


@dataclass(frozen=True)
class Fragment:
    """Entries ``first_entry_id..last_entry_id`` of one segment of a ledger,
    whose ensemble contains the lost bookies ``lost`` (in ensemble order).

    ``last_entry_id`` is None for the last segment of a ledger that is not
    closed (its end is not known until the ledger is recovered), and below
    ``first_entry_id`` for an empty segment.
    """

    ledger_id: int
    first_entry_id: int
    last_entry_id: int | None
    ensemble: tuple[str, ...]
    lost: tuple[str, ...]
    write_quorum: int

    @property
    def ensemble_size(self) -> int:
        return len(self.ensemble)

    @property
    def schedule(self) -> QuorumSchedule:
        """Which positions of the ensemble hold which entry."""
        return QuorumSchedule(len(self.ensemble), self.write_quorum)

    @property
    def positions(self) -> tuple[int, ...]:
        """Ensemble positions of the lost bookies."""
        return tuple(i for i, b in enumerate(self.ensemble) if b in self.lost)

    def copies_on_lost(self, entry_id: int) -> list[int]:
        """Positions of lost bookies in the write set of ``entry_id`` (write-set order)."""
        lost = set(self.positions)
        return [i for i in self.schedule.write_set(entry_id) if i in lost]

    def entries(self) -> Iterator[int]:
        """The entries of the fragment that had a copy on a lost bookie, ascending."""
        if self.last_entry_id is None:
            raise ValueError(
                f"ledger {self.ledger_id}: the open segment from entry {self.first_entry_id} has no known end"
            )
        schedule = self.schedule
        size = schedule.ensemble_size
        residues = _holding_residues(self.positions, schedule)
        periodic_end = min(self.last_entry_id, schedule.striped_until)
        for entry_id in range(self.first_entry_id, periodic_end + 1):
            if entry_id % size in residues:
                yield entry_id
        for entry_id in range(max(self.first_entry_id, periodic_end + 1), self.last_entry_id + 1):
            if self.copies_on_lost(entry_id):
                yield entry_id

    def entry_count(self) -> int | None:
        """How many entries :meth:`entries` yields (None when the end is not known)."""
        if self.last_entry_id is None:
            return None
        first, last = self.first_entry_id, self.last_entry_id
        if last < first:
            return 0
        schedule = self.schedule
        if last > schedule.striped_until:
            return sum(1 for _ in self.entries())
        size = schedule.ensemble_size
        residues = _holding_residues(self.positions, schedule)

        def upto(n: int) -> int:  # entries 0..n-1 held by a lost bookie
            whole, rest = divmod(n, size)
            return whole * len(residues) + sum(1 for r in residues if r < rest)

        return upto(last + 1) - upto(first)


def fragments_to_rereplicate(
    ledger_id: int, md: LedgerMetadata, lost: Iterable[str], last_entry_id: int | None = None
) -> list[Fragment]:
    """Every segment of ``md`` whose ensemble contains one of ``lost``.

    The last segment ends at the ledger's last entry when it is closed, else
    at ``last_entry_id`` (e.g. a LAC) if given, else its end is unknown (None).
    """
    lost = set(lost)
    out = []
    for first, last, ensemble in md.segment_ranges():
        members = tuple(b for b in ensemble if b in lost)
        if not members:
            continue
        if last is None:
            last = last_entry_id
        out.append(Fragment(ledger_id, first, last, tuple(ensemble), members, md.write_quorum))
    return out


def choose_replacements(
    fragment: Fragment,
    writable: Iterable[str],
    readonly: Collection[str] = (),
    *,
    target: str | None = None,
    exclude: Collection[str] = (),
    placement: RandomPlacement | None = None,
) -> dict[str, str]:
    """``{lost bookie: replacement}`` for one fragment.

    Replacements are writable (not read-only), outside the fragment's
    ensemble, not in ``exclude`` (pass every lost bookie) and distinct.  With
    ``target``, the first lost member goes to the target (which must be
    writable and outside the ensemble: :class:`TargetUnusable` otherwise);
    any further lost member of the same ensemble gets a random bookie, since
    one bookie cannot hold two positions of an ensemble.  Too few candidates:
    :class:`~bkctl.wire.client.placement.NotEnoughBookies`.
    """
    placement = placement if placement is not None else RandomPlacement()
    writable = list(writable)
    ensemble = list(fragment.ensemble)
    lost = list(fragment.lost)
    chosen: dict[str, str] = {}
    if target is not None:
        where = f"ledger {fragment.ledger_id} segment from entry {fragment.first_entry_id}"
        if target in ensemble:
            raise TargetUnusable(f"target bookie {target} is already in the ensemble of {where}")
        if target in exclude:
            raise TargetUnusable(f"target bookie {target} is one of the bookies being recovered")
        if target not in writable or target in readonly:
            raise TargetUnusable(f"target bookie {target} is not a writable bookie")
        first = lost.pop(0)
        chosen[first] = target
        ensemble[ensemble.index(first)] = target
    if lost:
        replaced = placement.replace_bookies(
            ensemble,
            lost,
            writable,
            readonly,
            exclude=set(exclude) | set(fragment.lost),
            write_quorum=fragment.write_quorum,
        )
        for old in lost:
            chosen[old] = replaced[ensemble.index(old)]
    return chosen


def entries_by_bookie(md: LedgerMetadata, last_entry_id: int) -> dict[str, int]:
    """bookie -> how many of a ledger's entries it holds a copy of, the last segment
    ending at the ledger's last entry when it is closed, else at ``last_entry_id``
    (what :func:`fragments_to_rereplicate` counts for each bookie alone, in one pass)."""
    schedule = QuorumSchedule(md.ensemble_size, md.write_quorum)
    held: dict[str, int] = {}
    for first, last, ensemble in md.segment_ranges():
        for bookie, count in zip(ensemble, schedule.held_by_position(first, last_entry_id if last is None else last)):
            if count:
                held[bookie] = held.get(bookie, 0) + count
    return held


def bytes_held(ledger_id: int, md: LedgerMetadata, lost: Iterable[str]) -> int:
    """About how many bytes of a closed ledger the ``lost`` bookies held, by the one rule
    ``disk`` counts with (:func:`~bkctl.wire.domain.replica_size.replica_bytes`); 0 for a
    ledger that is not closed (not known)."""
    from bkctl.wire.domain.replica_size import replica_bytes

    if not md.is_closed or md.last_entry_id < 0:
        return 0
    entries = sum(f.entry_count() or 0 for f in fragments_to_rereplicate(ledger_id, md, lost))
    return replica_bytes(md, entries)
