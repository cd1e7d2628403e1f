"""Which bookies of an ensemble hold which entry, and what counts as a quorum
(Java's ``DistributionSchedule`` / ``RoundRobinDistributionSchedule``).

Round-robin striping: copy ``i`` of entry ``e`` goes to ensemble index
``(e + i) mod E`` for ``i < Qw`` (with Java's 32-bit truncation of the sum,
:func:`~bkctl.wire.metadata.ledger.write_set_indices`); an add is
acknowledged once ``Qa`` of its write set stored it; and a set of answers
*covers* the ensemble when every write quorum has fewer than ``Qa`` bookies
left unheard (Java's coverage rule for recovery and LAC reads).  Readers,
writers, recovery and placement all ask this one schedule.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bkctl.wire.metadata.ledger import LedgerMetadata

__all__ = ["QuorumSchedule", "INT32_MAX"]

INT32_MAX = (1 << 31) - 1


class QuorumSchedule:
    """The round-robin schedule of an ``(E, Qw, Qa)`` ledger."""

    __slots__ = ("ensemble_size", "write_quorum", "ack_quorum", "_stripe")

    def __init__(self, ensemble_size: int, write_quorum: int, ack_quorum: int = 1):
        if not ensemble_size >= write_quorum >= ack_quorum >= 1:
            raise ValueError(f"need E >= Qw >= Qa >= 1, not E={ensemble_size} Qw={write_quorum} Qa={ack_quorum}")
        self.ensemble_size = ensemble_size
        self.write_quorum = write_quorum
        self.ack_quorum = ack_quorum
        self._stripe: tuple[tuple[int, ...], ...] | None = None

    @classmethod
    def of(cls, md: LedgerMetadata) -> QuorumSchedule:
        """The schedule of a ledger's metadata."""
        return cls(md.ensemble_size, md.write_quorum, md.ack_quorum)

    def __repr__(self) -> str:
        return f"QuorumSchedule(E={self.ensemble_size}, Qw={self.write_quorum}, Qa={self.ack_quorum})"

    # -- write sets ------------------------------------------------------------------

    @property
    def striped_until(self) -> int:
        """The last entry id whose write set is :meth:`stripe`\\ ``[e % E]``
        (above it Java's int truncation decides)."""
        return INT32_MAX - self.write_quorum

    def write_set(self, entry_id: int) -> list[int]:
        """Ensemble indexes holding copies 0..Qw-1 of ``entry_id``."""
        # the striping rule is the metadata's (its write_set); imported here so that
        # placement, which needs only the quorums, does not load protobuf
        from bkctl.wire.metadata.ledger import write_set_indices

        return write_set_indices(entry_id, self.ensemble_size, self.write_quorum)

    def stripe(self) -> tuple[tuple[int, ...], ...]:
        """The write sets of entries ``0..E-1``: entry ``e`` (0 <= e <=
        :attr:`striped_until`) has ``stripe()[e % E]``.  Computed once."""
        stripe = self._stripe
        if stripe is None:
            size = self.ensemble_size
            stripe = self._stripe = tuple(tuple(self.write_set(e)) for e in range(size))
        return stripe

    def held_by_position(self, first: int, last: int) -> tuple[int, ...]:
        """How many of entries ``first..last`` each ensemble index holds a copy of
        (0 each when ``last < first``): by whole stripes up to :attr:`striped_until`,
        entry by entry above it.  ``disk`` asks this of every segment of a million ledgers."""
        size = self.ensemble_size
        counts = [0] * size
        if last < first:
            return tuple(counts)
        striped_end = min(last, self.striped_until)
        if first <= striped_end:
            for index, prefix in enumerate(_held_prefixes(size, self.write_quorum)):
                whole, rest = divmod(striped_end + 1, size)
                upto_end = whole * prefix[size] + prefix[rest]
                whole, rest = divmod(first, size)
                counts[index] = upto_end - (whole * prefix[size] + prefix[rest])
        for entry_id in range(max(first, striped_end + 1), last + 1):
            for index in self.write_set(entry_id):
                counts[index] += 1
        return tuple(counts)

    def stripe_bookies(self, ensemble: Sequence[str]) -> list[tuple[str, ...]]:
        """:meth:`stripe` in bookie ids of ``ensemble``."""
        return [tuple([ensemble[i] for i in ws]) for ws in self.stripe()]

    def write_set_bookies(self, entry_id: int, ensemble: Sequence[str]) -> list[str]:
        """:meth:`write_set` in bookie ids of ``ensemble``."""
        return [ensemble[i] for i in self.write_set(entry_id)]

    # -- quorums ---------------------------------------------------------------------

    def quorums(self) -> list[list[int]]:
        """Every distinct write quorum (a list of ensemble indexes): the one
        set of all when Qw = E, else the E windows starting at each index."""
        size, qw = self.ensemble_size, self.write_quorum
        if qw >= size:
            return [list(range(size))]
        return [[(start + k) % size for k in range(qw)] for start in range(size)]

    def quorums_with(self, index: int) -> list[list[int]]:
        """The write quorums that contain ensemble index ``index``."""
        size, qw = self.ensemble_size, self.write_quorum
        if qw >= size:
            return [list(range(size))]
        return [[(start + k) % size for k in range(qw)] for start in range(index - qw + 1, index + 1)]

    def covered(self, responded: Collection[int]) -> bool:
        """True when every write quorum has fewer than ``Qa`` indexes outside
        ``responded`` (i.e. at least ``Qw - Qa + 1`` answered): no entry can
        have been acknowledged by bookies not heard from."""
        size, qa = self.ensemble_size, self.ack_quorum
        for start in range(size):
            unknown = 0
            for i in range(self.write_quorum):
                if (start + i) % size not in responded:
                    unknown += 1
            if unknown >= qa:
                return False
        return True

    @property
    def answers_to_rule_out(self) -> int:
        """How many bookies of a write set must say "not here" before an
        entry cannot have been acknowledged: ``Qw - Qa + 1``."""
        return self.write_quorum - self.ack_quorum + 1


@functools.lru_cache(maxsize=256)
def _held_prefixes(ensemble_size: int, write_quorum: int) -> tuple[tuple[int, ...], ...]:
    """Per ensemble index ``i``: ``p[r]`` = how many of entries ``0..r-1`` of a stripe
    index ``i`` holds (``p[E]``: a whole stripe's)."""
    stripe = QuorumSchedule(ensemble_size, write_quorum).stripe()
    out = []
    for index in range(ensemble_size):
        prefix = [0]
        for write_set in stripe:
            prefix.append(prefix[-1] + (index in write_set))
        out.append(tuple(prefix))
    return tuple(out)
