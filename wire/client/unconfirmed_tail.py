"""The entries of an open ledger past its last add confirmed that its
writer may have had acknowledged -- read without fencing anything.

A BookKeeper writer puts in each entry the LAC it knew when it sent it, so
while it writes, a reader that does not recover the ledger sees a LAC one
behind (or more, when it pipelines): the newest entries lie past it.
Recovery (Java's ``LedgerRecoveryOp``) would find them, but it fences the
ledger: the writer's next add fails.  A live Pulsar broker owns its topic's
open ledger and each cursor's ledger, so a read-only tool must not recover
them.  This reads the tail as a reader that allows unconfirmed entries does
(Java's ``readUnconfirmedEntries``), with a rule for where it ends:

1. the LAC and each bookie's last entry, asked of the last ensemble without
   fencing (:class:`~.read_lac_quorum.ReadLacQuorum`, Java's
   ``ReadLastConfirmedOp``: v3 READ_LAC, v2 a read of entry -1);
2. then each entry from LAC + 1 on is read from every bookie of its write
   set; it is taken when at least an ack quorum (Qa) of them hold it with a
   valid digest -- the writer may have had it acknowledged, and a recovery
   would keep it -- and the search stops at the first entry that fewer
   hold: with fewer than Qa copies the writer cannot have been told it was
   written, and entries are acknowledged in order, so nothing after it was
   either.  A bookie that does not answer is not counted as holding it, so
   the answer errs on the side of the LAC, never past what was written.

Nothing here writes to a bookie or to the metadata: the writer can go on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from twisted.internet import defer

from bkctl.wire.codecs.digest import VerifiedEntry
from bkctl.wire.errors import DigestError

from .entry_reads import EntryRead
from .errors import MISSING_ON_BOOKIE
from .helpers import describe_errors
from .read_lac_quorum import ReadLacQuorum
from .readable_ledger import ReadableLedger

__all__ = ["Tail", "UnconfirmedTail"]

#: Entries past the LAC judged at once (each asked of its whole write set): a
#: pipelining writer can leave hundreds past the LAC its entries carry.
WINDOW = 64


@dataclass
class Tail:
    """What :class:`UnconfirmedTail` found of an open ledger."""

    #: the last add confirmed, as the bookies' answers give it
    lac: int
    #: the last entry taken: ``lac`` or an entry past it (-1: the ledger has none)
    last: int
    #: the payload of ``last`` when it lies past the LAC (read while judging it), else None
    newest: bytes | None = None
    #: the ledger's length (payload bytes) up to ``last``; None when unknown
    length: int | None = None
    #: entry id -> how many bookies of its write set hold it (the entries past the LAC looked at)
    holders: dict[int, int] = field(default_factory=dict)
    write_quorum: int = 0
    ack_quorum: int = 0
    #: why the search stopped before a later entry a bookie has (None: no bookie has a later one)
    stopped: str | None = None

    @property
    def beyond_lac(self) -> int:
        """How many entries past the LAC were taken."""
        return self.last - self.lac

    def rule(self) -> str:
        """How the entries past the LAC were judged, in a few words."""
        return f"held by an ack quorum ({self.ack_quorum}) of its {self.write_quorum} bookies"


class _Holders:
    """One entry asked of every bookie of its write set: fires with
    ``(holders, VerifiedEntry or None, errors)`` once all answered."""

    def __init__(self, ledger: ReadableLedger, entry_id: int):
        self.ledger = ledger
        self.entry_id = entry_id
        self.bookies = ledger.write_set(entry_id)
        self.pending = len(self.bookies)
        self.holders = 0
        self.entry: VerifiedEntry | None = None
        self.errors: list[BaseException] = []
        self.result: defer.Deferred[Any] = defer.Deferred()

    def start(self) -> defer.Deferred[Any]:
        ledger = self.ledger
        for bookie in self.bookies:
            try:
                d = ledger.client.pool.get(bookie).read(ledger.ledger_id, self.entry_id)
            except Exception as exc:  # noqa: BLE001 - a closed pool and such: that bookie did not answer
                d = defer.fail(exc)
            d.addCallbacks(self._answered, self._failed, errbackArgs=(bookie,))
        return self.result

    def _answered(self, body: bytes) -> None:
        try:
            entry = self.ledger.digest.verify(body, self.entry_id)
        except DigestError as exc:
            self.errors.append(exc)
        else:
            self.holders += 1
            self.entry = entry
        self._done()

    def _failed(self, failure: Any, bookie: str) -> None:
        if not isinstance(failure.value, MISSING_ON_BOOKIE):
            self.errors.append(type(failure.value)(f"bookie {bookie}: {failure.value}"))
        self._done()

    def _done(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            self.result.callback((self.holders, self.entry, self.errors))


class UnconfirmedTail:
    """Finds an open ledger's tail (see the module documentation);
    :meth:`start` fires with a :class:`Tail`.  The LAC found is remembered
    by the handle (``learn_lac``); the entries past it are not (they are
    read with ``allow_unconfirmed``)."""

    def __init__(self, ledger: ReadableLedger):
        self.ledger = ledger

    def start(self) -> defer.Deferred[Any]:
        return defer.ensureDeferred(self._find())

    async def _find(self) -> Tail:
        ledger = self.ledger
        md = ledger.metadata
        schedule = ledger.schedule
        lac, lengths = await ReadLacQuorum(ledger, fence=False).start()
        lac = max(lac, md.ensembles[-1][0] - 1)
        ledger.learn_lac(lac)
        tail = Tail(lac, lac, write_quorum=schedule.write_quorum, ack_quorum=schedule.ack_quorum)
        highest = max(lengths, default=-1)
        first = lac + 1
        while first <= highest and tail.stopped is None:
            ids = range(first, min(first + WINDOW, highest + 1))
            answers = await defer.gatherResults([_Holders(ledger, e).start() for e in ids])
            for entry_id, (holders, entry, errors) in zip(ids, answers):
                tail.holders[entry_id] = holders
                if holders < schedule.ack_quorum:
                    tail.stopped = (
                        f"entry {entry_id} is held by {holders} of its {schedule.write_quorum} "
                        f"bookies, fewer than the ack quorum {schedule.ack_quorum}"
                        + (f" ({describe_errors(errors)})" if errors else "")
                    )
                    break
                tail.last, tail.length, tail.newest = entry_id, entry.length, entry.payload
            first = ids[-1] + 1
        if tail.length is None and tail.last >= 0:
            if tail.last in lengths:
                tail.length = lengths[tail.last]
            else:
                try:
                    tail.length = (await EntryRead(ledger, tail.last).start()).length
                except Exception:  # noqa: BLE001 - the length is a nicety: unknown then
                    tail.length = None
        elif tail.last < 0:
            tail.length = 0
        return tail
