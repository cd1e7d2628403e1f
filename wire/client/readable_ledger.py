"""What a read operation needs of the ledger it reads (a
:class:`~bkctl.wire.client.read_handle.ReadHandle` gives it), declared so
that the operations (:mod:`.entry_reads`, :mod:`.batch_reads`,
:mod:`.read_lac_quorum`, :mod:`.long_poll_read`) depend on it and not on
the handle's module, as Java's read ops take the ledger handle they serve.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bkctl.wire.codecs.digest import DigestManager
    from bkctl.wire.metadata.ledger import LedgerMetadata

    from .quorum import QuorumSchedule

__all__ = ["ReadableLedger", "StripeCursor"]


class ReadableLedger(Protocol):
    """One ledger as its read operations see it."""

    ledger_id: int
    #: checks and unpacks the entries read (the ledger's digest type and password)
    digest: DigestManager
    #: the master key a fencing read presents
    master_key: bytes
    #: E, Qw, Qa and the coverage rules
    schedule: QuorumSchedule
    #: the client: ``pool.get(bookie_id)`` is a :class:`~.channel.BookieChannel`;
    #: ``protocol`` ("v3" or "v2")
    client: Any

    @property
    def metadata(self) -> LedgerMetadata:
        """The metadata as the handle knows it now (it changes: ensemble changes, refreshes)."""

    def write_set(self, entry_id: int) -> tuple[str, ...]:
        """The bookies that hold ``entry_id``, in write-set order."""

    def stripe(self, entry_id: int) -> tuple[int, int, list[tuple[str, ...]]]:
        """``(lo, hi, sets)``: the entries ``lo..hi`` around ``entry_id`` (0 <=
        it <= Java's int limit) whose write sets are ``sets[e % ensemble_size]``."""

    def segment_last(self, entry_id: int) -> int:
        """The last entry id of ``entry_id``'s segment (a large number for the last one)."""

    def readable_limit(self) -> int:
        """The highest entry that may be read: the last entry of a closed ledger, else the LAC."""

    def learn_lac(self, lac: int) -> None:
        """A LAC the bookies reported: remembered when higher."""

    def payload_checker(self) -> Callable[[bytes, int], bytes]:
        """The check of many entries read, ``(entry, entry_id)`` -> the payload
        (:meth:`~bkctl.wire.codecs.digest.DigestManager.payload_checker` with the twins in use)."""


class StripeCursor:
    """The write sets of the stripe an entry lies in (:meth:`ReadableLedger.stripe`),
    kept for the entries after it: readers and writers move through a ledger in
    order, and ``write_set`` then costs a range check and an index instead of the
    ledger's segment search.  Computed under one metadata: an ensemble change or
    a refresh (a new metadata object) makes it look again; past Java's int limit,
    where entries do not stripe, it asks the ledger each time."""

    __slots__ = ("ledger", "md", "lo", "hi", "sets")

    def __init__(self, ledger: ReadableLedger):
        self.ledger = ledger
        self.md: LedgerMetadata | None = None  # the metadata lo, hi and sets are of
        self.lo = 0
        self.hi = -1
        self.sets: list[tuple[str, ...]] = []

    def covers(self, first: int, last: int) -> bool:
        """Whether ``first..last`` lie in the stripe kept, under the ledger's metadata now."""
        return self.lo <= first and last <= self.hi and self.ledger.metadata is self.md

    def write_set(self, entry_id: int) -> tuple[str, ...]:
        """``ledger.write_set(entry_id)``, keeping ``entry_id``'s stripe for the next ones."""
        if self.lo <= entry_id <= self.hi and self.ledger.metadata is self.md:
            sets = self.sets
            return sets[entry_id % len(sets)]
        ledger = self.ledger
        if 0 <= entry_id <= ledger.schedule.striped_until:
            self.md = ledger.metadata
            self.lo, self.hi, self.sets = ledger.stripe(entry_id)
        return ledger.write_set(entry_id)
