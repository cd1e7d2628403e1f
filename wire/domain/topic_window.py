"""Which of a topic's entries a read takes, by the rules a broker reads them with: the
``--from``/``--to`` window of publish times narrowed to whole ledgers and entry ranges
(:class:`Pushdown`, Pulsar SQL's ``__publish_time__`` pushdown), and which copy of a ledger
both offloaded and still in BookKeeper is read (:func:`offloaded_copy`, the broker's
``managedLedgerDataReadPriority``).  ``bkctl export --topic`` plans its tasks by them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..proto.pulsar_ml_pb2 import ManagedLedgerInfo
    from ..pulsar.offload_store import OffloadLocation
    from .entry_source import EntrySource

__all__ = ["OFFLOAD_READ", "PUBLISH_TIME_SLACK_MS", "PublishTimeOf", "Pushdown", "offloaded_copy"]

#: Pulsar's read priorities of a ledger both offloaded and in BookKeeper (broker.conf's
#: managedLedgerDataReadPriority)
OFFLOAD_READ = ("tiered-storage-first", "bookkeeper-first")


#: ``time_of(source, entry)``: the publish time of one entry of the ledger ``source`` reads, one
#: entry read (None: unknown)
PublishTimeOf = Callable[["EntrySource", int], "int | None"]


#: How far publish times may run against the order of a topic's entries and the
#: broker's ledger timestamps (producer clocks, batching delays, sends queued at a
#: rollover) for the --from/--to pushdown still to find every message of the window.
PUBLISH_TIME_SLACK_MS = 60_000


class Pushdown:
    """The --from/--to pushdown of one plan (Pulsar SQL's ``__publish_time__``
    pushdown): whole ledgers skipped by ManagedLedgerInfo's timestamps -- a
    closed ledger whose close time is before ``from`` (less the slack) holds
    nothing newer; a ledger whose predecessor closed after ``to`` (plus the
    slack) was created after it and holds nothing older -- and inside a ledger
    the first and last entries of the window found by bisecting on the
    entries' publish times (``time_of(source, entry)``, one
    entry read each), as publish times grow along a topic.  The exact window
    is still applied to every message read; ``to_json`` counts what was skipped."""

    def __init__(
        self, from_ms: int | None, to_ms: int | None, time_of: PublishTimeOf, slack_ms: int = PUBLISH_TIME_SLACK_MS
    ):
        self.from_ms, self.to_ms, self.time_of, self.slack = from_ms, to_ms, time_of, slack_ms
        self.ledgers_skipped = self.entries_skipped = self.bisection_reads = 0

    @property
    def active(self) -> bool:
        return self.from_ms is not None or self.to_ms is not None

    def skip_ledger(self, closed_at: int | None, previous_closed_at: int | None) -> bool:
        """Whether a ledger lies wholly outside the window by the managed ledger's timestamps."""
        if self.from_ms is not None and closed_at and closed_at + self.slack < self.from_ms:
            return True
        if self.to_ms is None or not previous_closed_at:
            return False
        return previous_closed_at - self.slack >= self.to_ms

    def _first_at_or_after(self, source: EntrySource, lo: int, hi: int, target: int) -> int:
        """The first entry of ``lo..hi`` published at or after ``target`` (``hi + 1``: none)."""
        end = hi + 1
        while lo < end:
            mid = (lo + end) // 2
            self.bisection_reads += 1
            t = self.time_of(source, mid)
            if t is None:  # an entry whose time cannot be read: stop narrowing, keep the rest
                return lo
            if t < target:
                lo = mid + 1
            else:
                end = mid
        return lo

    def narrow(
        self,
        source: EntrySource,
        first: int,
        last: int,
        closed_at: int | None = None,
        previous_closed_at: int | None = None,
    ) -> tuple[int, int]:
        """The entries of ``first..last`` that may hold messages of the window;
        an edge the managed ledger's timestamps already place outside the
        ledger (created after ``from``, closed before ``to``) is not bisected."""
        total = last - first + 1
        if total <= 0:
            return first, last
        if self.from_ms is not None and not (previous_closed_at and previous_closed_at >= self.from_ms):
            first = self._first_at_or_after(source, first, last, self.from_ms - self.slack)
        if self.to_ms is not None and first <= last and not (closed_at and closed_at < self.to_ms):
            last = self._first_at_or_after(source, first, last, self.to_ms + self.slack) - 1
        self.entries_skipped += total - max(0, last - first + 1)
        return first, last

    def to_json(self) -> dict[str, Any]:
        from ..text import utc_iso

        return {
            "from": utc_iso(self.from_ms),
            "to": utc_iso(self.to_ms),
            "slack_ms": self.slack,
            "ledgers_skipped": self.ledgers_skipped,
            "entries_skipped": self.entries_skipped,
            "bisection_reads": self.bisection_reads,
        }


def offloaded_copy(
    ledger_info: ManagedLedgerInfo.LedgerInfo, managed_ledger: str, in_bookkeeper: bool, priority: str
) -> OffloadLocation | None:
    """The offloaded copy to read ``ledger_info``'s ledger from (None: the bookies, or nowhere):
    a complete offload in a store this reader speaks, unless the ledger is still in BookKeeper
    and ``priority`` is bookkeeper-first."""
    from ..pulsar.offload_store import location_of

    location = location_of(ledger_info, managed_ledger)
    if location is None or not location.complete or not (location.is_s3 or location.is_filesystem):
        return None
    if in_bookkeeper and priority == "bookkeeper-first":
        return None
    if not ledger_info.HasField("entries"):
        return None
    return location
