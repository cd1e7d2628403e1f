"""What a read operation needs of the ledger it reads (a
:class:`~bkctl.wire.client.read_handle.ReadHandle` gives it), declared so
that the operations (:mod:`.entry_reads`, :mod:`.batch_reads`,
:mod:`.read_lac_quorum`, :mod:`.long_poll_read`) depend on it and not on
the handle's module, as Java's read ops take the ledger handle they serve.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bkctl.wire.codecs.digest import DigestManager
    from bkctl.wire.metadata.ledger import LedgerMetadata

    from .quorum import QuorumSchedule

__all__ = ["ReadableLedger"]


class ReadableLedger(Protocol):
    """One ledger as its read operations see it."""

    ledger_id: int
    #: checks and unpacks the entries read (the ledger's digest type and password)
    digest: "DigestManager"
    #: the master key a fencing read presents
    master_key: bytes
    #: E, Qw, Qa and the coverage rules
    schedule: "QuorumSchedule"
    #: the client: ``pool.get(bookie_id)`` is a :class:`~.channel.BookieChannel`;
    #: ``protocol`` ("v3" or "v2")
    client: Any

    @property
    def metadata(self) -> "LedgerMetadata":
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
