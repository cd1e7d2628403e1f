"""What a rebalance or a drain starts from, read in one walk of the ledger metadata: how
many live bytes each bookie holds, and every replica that could move.

A *replica* here is what one bookie holds of one ledger: its copies in every segment whose
ensemble names it.  A closed ledger's replica moves whole (one metadata write swaps the
bookie in each of those segments); an open ledger's replica moves only its closed segments,
since a writer may still add to the last one.  Bytes are the one rule ``bkctl disk`` counts
with too (:func:`~bkctl.wire.domain.replica_size.replica_bytes`); an open ledger has no length
in its metadata, so its replicas count as 0 bytes: a rebalance leaves them, a drain moves
them all the same.

Memory grows with the replicas, not with their metadata: each is four numbers in arrays,
and the ensembles they name are interned (a cluster has far fewer distinct ensembles than
ledgers), so a walk of 10^6 ledgers keeps tens of MiB.
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from bkctl.wire.client.quorum import QuorumSchedule
from bkctl.wire.domain.replica_size import replica_bytes
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.metadata.store import LedgerRead

__all__ = ["ClusterSurvey", "Replica", "Shape", "Unmovable", "UnmovableKind"]


@dataclass(frozen=True)
class Shape:
    """The segments a replica spans: ``(first_entry_id, ensemble)`` of each segment naming
    its bookie, and the ledger's write quorum."""

    write_quorum: int
    segments: tuple[tuple[int, tuple[str, ...]], ...]

    def names(self, bookie: str) -> bool:
        """Whether one of the segments already has ``bookie`` (a move there would put two
        copies of an entry on one bookie)."""
        return any(bookie in ensemble for _first, ensemble in self.segments)


@dataclass(frozen=True)
class Replica:
    """What ``bookie`` holds of ledger ``ledger_id``: ``entries`` copies, about ``nbytes``
    bytes, over the segments of ``shape``."""

    ledger_id: int
    bookie: str
    nbytes: int
    entries: int
    shape: Shape


class UnmovableKind(enum.Enum):
    """Why a replica cannot move now."""

    OPEN_TAIL = "open-tail"  # the last segment of an open ledger: its writer may still add
    IN_RECOVERY = "in-recovery"  # being recovered (fenced): its end is not known yet
    UNREADABLE = "unreadable-metadata"  # its metadata does not decode
    NO_TARGET = "no-target"  # no bookie can take it within the placement policy
    LOCKED = "locked"  # a replication worker (or another move) holds it
    MARKED = "under-replicated"  # marked under-replicated: left to the repair


@dataclass(frozen=True)
class Unmovable:
    """A replica left where it is, and why (one line for people)."""

    ledger_id: int
    bookie: str
    kind: UnmovableKind
    reason: str


@dataclass
class _Held:
    """One bookie's replicas as parallel arrays (ledger id, bytes, entries, shape index)."""

    ledger_ids: array[int] = field(default_factory=lambda: array("q"))
    nbytes: array[int] = field(default_factory=lambda: array("q"))
    entries: array[int] = field(default_factory=lambda: array("q"))
    shapes: array[int] = field(default_factory=lambda: array("l"))


class ClusterSurvey:
    """Each bookie's live bytes and ledgers, its movable replicas, and what cannot move, from
    one walk (:meth:`add` each :class:`~bkctl.wire.metadata.store.LedgerRead` of
    ``store.ledgers.walk()``).  ``keep`` (None: every bookie) limits the replicas kept to
    those of some bookies (a drain keeps only the drained bookie's); the bytes are counted
    for every bookie all the same.  ``placement_check(md)`` (optional) returns the first
    entry ids of a ledger's segments that break the placement policy: those ledgers are
    kept whole in :attr:`not_adhering`, for ``--fix-placement``."""

    def __init__(
        self,
        keep: Iterable[str] | None = None,
        placement_check: Callable[[LedgerMetadata], list[int]] | None = None,
    ):
        self.keep = None if keep is None else frozenset(keep)
        self.placement_check = placement_check
        #: bookie -> live bytes (closed ledgers)
        self.used: dict[str, int] = {}
        #: bookie -> ledgers naming it
        self.ledgers: dict[str, int] = {}
        self.unmovable: list[Unmovable] = []
        #: (ledger id, metadata, first entry ids of the failing segments) of each ledger with a
        #: segment that breaks the placement policy
        self.not_adhering: list[tuple[int, LedgerMetadata, list[int]]] = []
        self.walked = 0
        self._held: dict[str, _Held] = {}
        self._shapes: list[Shape] = []
        self._shape_ids: dict[Shape, int] = {}
        self._schedules: dict[tuple[int, int], QuorumSchedule] = {}

    # -- the walk ---------------------------------------------------------------
    def add_all(self, reads: Iterable[LedgerRead]) -> ClusterSurvey:
        for read in reads:
            self.add(read)
        return self

    def add(self, read: LedgerRead) -> None:
        self.walked += 1
        md = read.metadata
        if md is None:
            return  # deleted meanwhile
        if isinstance(md, Exception):
            self.unmovable.append(Unmovable(read.ledger_id, "", UnmovableKind.UNREADABLE, str(md)))
            return
        ledger_id = read.ledger_id
        schedule = self._schedule(md.ensemble_size, md.write_quorum)
        segments = md.segment_ranges()
        spans: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
        held: dict[str, int] = {}
        for index, (first, last, ensemble) in enumerate(segments):
            tail = index == len(segments) - 1 and last is None
            if tail:
                why = (
                    (UnmovableKind.IN_RECOVERY, "being recovered: its last segment's end is not known yet")
                    if md.is_in_recovery
                    else (UnmovableKind.OPEN_TAIL, "open: its writer may still add to its last segment")
                )
                for bookie in ensemble:
                    if self.keep is None or bookie in self.keep:
                        self.unmovable.append(Unmovable(ledger_id, bookie, *why))
                continue
            assert last is not None
            counts = schedule.held_by_position(first, last)
            for bookie, count in zip(ensemble, counts):
                held[bookie] = held.get(bookie, 0) + count
                spans.setdefault(bookie, []).append((first, tuple(ensemble)))
        for bookie in md.bookies:
            self.ledgers[bookie] = self.ledgers.get(bookie, 0) + 1
        for bookie, count in held.items():
            nbytes = replica_bytes(md, count)
            self.used[bookie] = self.used.get(bookie, 0) + nbytes
            if self.keep is not None and bookie not in self.keep:
                continue
            box = self._held.get(bookie)
            if box is None:
                box = self._held[bookie] = _Held()
            box.ledger_ids.append(ledger_id)
            box.nbytes.append(nbytes)
            box.entries.append(count)
            box.shapes.append(self._intern(Shape(md.write_quorum, tuple(spans[bookie]))))
        if self.placement_check is not None:
            failing = self.placement_check(md)
            if failing:
                self.not_adhering.append((ledger_id, md, failing))

    def _schedule(self, ensemble_size: int, write_quorum: int) -> QuorumSchedule:
        key = (ensemble_size, write_quorum)
        found = self._schedules.get(key)
        if found is None:
            found = self._schedules[key] = QuorumSchedule(ensemble_size, write_quorum)
        return found

    def _intern(self, shape: Shape) -> int:
        found = self._shape_ids.get(shape)
        if found is None:
            found = self._shape_ids[shape] = len(self._shapes)
            self._shapes.append(shape)
        return found

    # -- reading it -------------------------------------------------------------
    def replica_count(self, bookie: str) -> int:
        box = self._held.get(bookie)
        return 0 if box is None else len(box.ledger_ids)

    def replicas(self, bookie: str) -> Iterator[Replica]:
        """The movable replicas kept for ``bookie``, in walk (ledger id) order."""
        box = self._held.get(bookie)
        if box is None:
            return
        for i in range(len(box.ledger_ids)):
            yield self.replica(bookie, i)

    def replica(self, bookie: str, index: int) -> Replica:
        box = self._held[bookie]
        return Replica(
            box.ledger_ids[index], bookie, box.nbytes[index], box.entries[index], self._shapes[box.shapes[index]]
        )

    def sizes(self, bookie: str) -> array[int]:
        """The bytes of each replica kept for ``bookie`` (index as :meth:`replica`)."""
        box = self._held.get(bookie)
        return array("q") if box is None else box.nbytes
