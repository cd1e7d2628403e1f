"""Reading one ledger (Java's ``ReadOnlyLedgerHandle``).

:class:`ReadHandle` reads entries of any ledger, each kind of read an
operation of its own module, as Java's are (they see the handle as a
:class:`~.readable_ledger.ReadableLedger`):

* :mod:`.entry_reads` (``PendingReadOp``) -- each entry read from the
  bookies of its write set in write-set order, moving to the next replica
  on any failure; a read fails only when every replica failed;
* :mod:`.batch_reads` (``BatchedReadOp``) -- over v2, ledgers whose
  ensemble size equals their write quorum are read with BATCH_READ_ENTRY
  (bookies 4.17+; a fast path: :mod:`bkctl.wire.fastpath`, off: entry by
  entry);
* :mod:`.read_lac_quorum` (``ReadLastConfirmedOp``) -- the LAC of an open
  ledger from the bookies of its last ensemble, accepted once every write
  quorum has had ``Qw - Qa + 1`` valid answers;
* :mod:`.unconfirmed_tail` -- the entries of an open ledger past its LAC
  that its writer may have had acknowledged, read without fencing;
* :mod:`.long_poll_read` (``ReadLastConfirmedAndEntryOp``) -- a follower
  waits for the next entry with a long poll (v3);
* :mod:`.range_reader` -- a range batch by batch, batches read ahead.

Reads stop at the last add confirmed (LAC) of an open ledger or the last
entry of a closed one, unless ``allow_unconfirmed=True``
(:class:`EntryNotConfirmed` otherwise).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from twisted.internet import defer

from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
from bkctl.wire.errors import BKError
from bkctl.wire.fastpath import Twins
from bkctl.wire.metadata.ledger import LedgerMetadata

from .batch_reads import BatchReads
from .entry_reads import EntryRead, WindowedReads
from .errors import EntryNotConfirmed
from .long_poll_read import LongPollRead
from .quorum import QuorumSchedule
from .range_reader import RangeReader
from .read_lac_quorum import ReadLacQuorum
from .unconfirmed_tail import Tail, UnconfirmedTail

__all__ = ["ReadHandle"]

_INT64_MAX = (1 << 63) - 1


class ReadHandle:
    """Reads one ledger.  Made by ``BookKeeperClient.open_ledger``; its read
    operations see it as a :class:`~.readable_ledger.ReadableLedger`."""

    def __init__(
        self,
        client: Any,
        ledger_id: int,
        metadata: LedgerMetadata,
        version: int,
        password: bytes,
        digest_type: DigestType,
    ):
        self.client = client
        self.ledger_id = ledger_id
        #: the metadata as this handle knows it (replaced on ensemble changes and refreshes)
        self.metadata: LedgerMetadata = metadata
        self._version = version
        #: which bookies hold which entry, and the quorum rules (E, Qw, Qa never change)
        self.schedule = QuorumSchedule.of(metadata)
        self.password = bytes(password)
        self._ws_metadata: LedgerMetadata | None = None  # the metadata _ws_cache is for
        self._ws_cache: dict[tuple[int, int], tuple[str, ...]] = {}
        self._ws_starts: tuple[int, ...] = ()  # first entry ids of its segments
        self.digest_type = DigestType(digest_type)
        #: the implementations in use (:mod:`bkctl.wire.fastpath`): the client's record
        self.twins: Twins = client.twins
        self.digest = DigestManager(ledger_id, self.digest_type, self.password)
        self.master_key = master_key(self.password)
        self._lac = metadata.last_entry_id if metadata.is_closed else -1

    def __repr__(self) -> str:
        return f"<{type(self).__name__} ledger {self.ledger_id} {self.metadata.state.name} lac={self._lac}>"

    # -- state ------------------------------------------------------------------

    @property
    def metadata_version(self) -> int:
        return self._version

    @property
    def is_closed(self) -> bool:
        """True when the ledger's metadata (as this handle knows it) is CLOSED."""
        return self.metadata.is_closed

    @property
    def last_add_confirmed(self) -> int:
        """The highest entry known to be readable (-1: none)."""
        return self._lac

    @property
    def last_entry_id(self) -> int | None:
        """The last entry of a closed ledger (-1 if empty), else None."""
        return self.metadata.last_entry_id if self.metadata.is_closed else None

    @property
    def length(self) -> int | None:
        """Total payload bytes of a closed ledger, else None."""
        return self.metadata.length if self.metadata.is_closed else None

    def readable_limit(self) -> int:
        """The highest entry that may be read: the last entry of a closed ledger, else the LAC."""
        md = self.metadata
        return md.last_entry_id if md.is_closed else self._lac

    def learn_lac(self, lac: int) -> None:
        """A LAC the bookies reported: remembered when higher (never past
        the last entry of a closed ledger)."""
        if lac > self._lac and not self.metadata.is_closed:
            self._lac = lac

    def payload_checker(self) -> Callable[[bytes, int], bytes]:
        """The check of many entries read: the digest's, with the twins of the client's
        codecs in use (``Twins.codec`` and the fast-path switch of :mod:`bkctl.wire.fastpath`)."""
        return self.digest.payload_checker(self.twins.codec, self.twins.enabled)

    def close(self) -> defer.Deferred[Any]:
        """Nothing to release for a reader; fires at once."""
        return defer.succeed(None)

    # -- LAC ----------------------------------------------------------------------

    def read_lac(self) -> defer.Deferred[Any]:
        """Fires with the LAC: the last entry of a closed ledger, else read from
        the bookies (and remembered when higher than what was known)."""
        if self.metadata.is_closed:
            return defer.succeed(self.metadata.last_entry_id)
        d = ReadLacQuorum(self, fence=False).start()

        def got(result: tuple[int, Any]) -> int:
            lac, _lengths = result
            lac = max(lac, self.metadata.ensembles[-1][0] - 1)
            if lac > self._lac:
                self._lac = lac
            return self._lac

        return d.addCallback(got)

    def read_tail(self) -> defer.Deferred[Any]:
        """Fires with the ledger's :class:`~.unconfirmed_tail.Tail`: for an
        open ledger the LAC and the entries past it an ack quorum holds
        (nothing fenced); for a closed one its last entry and length."""
        md = self.metadata
        if md.is_closed:
            return defer.succeed(
                Tail(
                    md.last_entry_id,
                    md.last_entry_id,
                    length=md.length,
                    write_quorum=md.write_quorum,
                    ack_quorum=md.ack_quorum,
                )
            )
        return UnconfirmedTail(self).start()

    def wait_for_entry(self, entry_id: int, timeout_ms: int) -> defer.Deferred[Any]:
        """Wait (long poll, v3) until the LAC reaches ``entry_id``, at most
        ``timeout_ms``: Java's ``ReadLastConfirmedAndEntryOp``.  Fires with
        ``(lac, entry)``: the LAC then known (remembered when higher), and
        ``(entry_id, payload)`` when a bookie sent that entry along with its
        LAC, else None (the LAC did not reach it in time, or the entry is to
        be read the usual way).  See :class:`LongPollRead`."""
        if entry_id <= self.readable_limit():
            return defer.succeed((self.readable_limit(), None))
        return LongPollRead(self, entry_id, timeout_ms).start()

    def refresh_metadata(self) -> defer.Deferred[Any]:
        """Re-read the metadata (to notice that an open ledger got closed)."""
        d: defer.Deferred[Any] = self.client.run_blocking(self.client.store.ledgers.read, self.ledger_id)

        def got(result: tuple[LedgerMetadata, int]) -> LedgerMetadata:
            md, version = result
            if version >= self._version:
                self.metadata, self._version = md, version
                if md.is_closed:
                    self._lac = md.last_entry_id
            return self.metadata

        return d.addCallback(got)

    # -- entries ------------------------------------------------------------------

    def _segment_starts(self) -> tuple[int, ...]:
        """The first entry ids of the segments; resets the write-set cache
        when the metadata changed."""
        md = self.metadata
        if md is not self._ws_metadata:
            self._ws_metadata = md
            self._ws_cache = {}
            self._ws_starts = md.first_entry_ids
        return self._ws_starts

    def write_set(self, entry_id: int) -> tuple[str, ...]:
        """``metadata.write_set(entry_id)``, computed once per stripe position,
        segment and metadata version: striping repeats every ensemble-size
        entries (below Java's int truncation)."""
        md = self.metadata
        schedule = self.schedule
        if not 0 <= entry_id <= schedule.striped_until:
            return tuple(md.write_set(entry_id))
        segment = bisect.bisect_right(self._segment_starts(), entry_id) - 1
        key = (segment, entry_id % md.ensemble_size)
        ws = self._ws_cache.get(key)
        if ws is None:
            ws = self._ws_cache[key] = tuple(schedule.write_set_bookies(entry_id, md.ensembles[segment][1]))
        return ws

    def stripe(self, entry_id: int) -> tuple[int, int, list[tuple[str, ...]]]:
        """``(lo, hi, sets)``: the entries ``lo..hi`` around ``entry_id`` (0 <=
        it <= Java's int limit) whose write sets are ``sets[e % ensemble_size]``
        under the current metadata: ``entry_id``'s segment."""
        md = self.metadata
        starts = self._segment_starts()
        i = bisect.bisect_right(starts, entry_id)
        lo = starts[i - 1]
        hi = min(starts[i] - 1 if i < len(starts) else _INT64_MAX, self.schedule.striped_until)
        return lo, hi, self.schedule.stripe_bookies(md.ensembles[i - 1][1])

    def segment_last(self, entry_id: int) -> int:
        """The last entry id of ``entry_id``'s segment (a large number for the last one)."""
        starts = self._segment_starts()
        i = bisect.bisect_right(starts, entry_id)
        return starts[i] - 1 if i < len(starts) else _INT64_MAX

    def _check_range(self, first: int, last: int, allow_unconfirmed: bool) -> None:
        if first < 0 or last < first:
            raise ValueError(f"bad entry range {first}..{last}")
        if allow_unconfirmed:
            return
        limit = self.readable_limit()
        if last > limit:
            what = f"the last entry is {limit}" if self.metadata.is_closed else f"the last add confirmed is {limit}"
            raise EntryNotConfirmed(f"cannot read entries {first}..{last} of ledger {self.ledger_id}: {what}")

    def _read_entry(self, entry_id: int) -> defer.Deferred[Any]:
        """One entry, verified (a :class:`~bkctl.wire.codecs.digest.VerifiedEntry`),
        with failover across its write set (in order): :class:`~.entry_reads.EntryRead`."""
        return EntryRead(self, entry_id).start()

    def read_entry(self, entry_id: int, *, allow_unconfirmed: bool = False) -> defer.Deferred[Any]:
        """Fires with the payload of one entry."""
        try:
            self._check_range(entry_id, entry_id, allow_unconfirmed)
        except (BKError, ValueError) as exc:
            return defer.fail(exc)
        return self._read_entry(entry_id).addCallback(lambda e: e.payload)

    def read_entries(self, first: int, last: int, *, allow_unconfirmed: bool = False) -> defer.Deferred[Any]:
        """Fires with ``[(entry_id, payload), ...]`` for ``first..last``
        (inclusive).  Up to the client's ``read_window`` entries are read at
        once; the first entry that cannot be read fails the whole call."""
        try:
            self._check_range(first, last, allow_unconfirmed)
        except (BKError, ValueError) as exc:
            return defer.fail(exc)
        return self._read_span(first, last)

    def read_range(self, first: int, last: int, batch: int = 100, *, allow_unconfirmed: bool = False) -> RangeReader:
        """Stream ``first..last`` in batches of at most ``batch`` entries.

        The returned :class:`RangeReader` is an async iterator (``async for
        entries in handle.read_range(...)`` inside ``defer.ensureDeferred``)
        and has :meth:`RangeReader.next_batch` for callback code.  As many
        batches are read at once as fit in the client's ``read_window``, and
        at least the one asked for and the next; with the one handed out they
        are all that is in memory.
        """
        if batch < 1:
            raise ValueError("batch must be >= 1")
        self._check_range(first, last, allow_unconfirmed)
        return RangeReader(self._read_span, first, last, batch, ahead=max(1, self._read_window // batch - 1))

    @property
    def _read_window(self) -> int:
        """The client's ``read_window``: entries read at once (at least 1)."""
        return max(1, int(getattr(self.client, "read_window", 256)))

    def _read_span(self, first: int, last: int) -> defer.Deferred[Any]:
        """Fires with ``[(entry_id, payload), ...]`` for ``first..last``."""
        md = self.metadata
        # BATCH_READ_ENTRY is a speed path (bkctl.wire.fastpath): off, every entry is read alone
        if (
            md.ensemble_size == md.write_quorum
            and getattr(self.client, "protocol", "v3") == "v2"
            and self.twins.enabled
        ):
            return BatchReads(self, first, last).start()
        return WindowedReads(self, first, last, self._read_window).start()
