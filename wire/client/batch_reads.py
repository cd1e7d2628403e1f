"""Reading a span of entries with BATCH_READ_ENTRY (Java's ``BatchedReadOp``; v2,
bookies 4.17+), for ledgers whose ensemble size equals their write quorum
(every bookie holds every entry of its segment).

Java's rule: up to :data:`BATCH_READ_ENTRIES` consecutive entries per
request, a few requests in flight, each entry verified; a bookie that
fails, answers short of the first entry or cannot batch-read hands over to
the next of the write set, and when none can, that entry is read alone
(:class:`~.entry_reads.EntryRead`, so its error is the same).
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from typing import Any

from twisted.internet import defer

from bkctl.wire.errors import DigestError

from .entry_reads import EntryRead
from .helpers import ignore_failure
from .readable_ledger import ReadableLedger

__all__ = ["BatchReads", "BATCH_READ_ENTRIES", "BATCH_READ_BYTES", "BATCH_READS_IN_FLIGHT"]

log = logging.getLogger(__name__)

#: Entries asked for by one BATCH_READ_ENTRY, byte budget of its answer, and
#: how many of them one span keeps in flight.
BATCH_READ_ENTRIES = 256
BATCH_READ_BYTES = 4 * 1024 * 1024
BATCH_READS_IN_FLIGHT = 4


class BatchReads:
    """Entries ``first..last`` of ``ledger`` by batch reads: :meth:`start`
    fires with ``[(entry_id, payload), ...]``, or with the first entry that
    cannot be read."""

    def __init__(self, ledger: ReadableLedger, first: int, last: int):
        self.ledger = ledger
        self.first = first
        self.last = last

    def start(self) -> defer.Deferred[Any]:
        return defer.ensureDeferred(self._span())

    async def _span(self) -> list[tuple[int, bytes]]:
        step = BATCH_READ_ENTRIES
        last = self.last
        chunks = iter(range(self.first, last + 1, step))

        def start(begin: int) -> defer.Deferred[Any]:
            return defer.ensureDeferred(self._chunk(begin, min(last, begin + step - 1)))

        pending = deque(start(b) for b in itertools.islice(chunks, BATCH_READS_IN_FLIGHT))
        out: list[tuple[int, bytes]] = []
        try:
            while pending:
                out.extend(await pending.popleft())
                begin = next(chunks, None)
                if begin is not None:
                    pending.append(start(begin))
        except BaseException:
            for d in pending:
                d.addErrback(ignore_failure)
            raise
        return out

    async def _chunk(self, first: int, last: int) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        next_id = first
        while next_id <= last:
            got = await self._batch_read(next_id, min(last, self.ledger.segment_last(next_id)))
            if not got:  # no replica could batch-read it: alone, with failover and its error
                entry = await EntryRead(self.ledger, next_id).start()
                got = [(entry.entry_id, entry.payload)]
            out.extend(got)
            next_id += len(got)
        return out

    async def _batch_read(self, first: int, last: int) -> list[tuple[int, bytes]]:
        """As many verified entries from ``first`` on (at most to ``last``, one
        segment) as the first replica of ``first``'s write set that can gives
        in one BATCH_READ; [] when none can."""
        ledger = self.ledger
        want = last - first + 1
        for bookie in ledger.write_set(first):
            try:
                bodies = await ledger.client.pool.get(bookie).batch_read(
                    ledger.ledger_id, first, want, BATCH_READ_BYTES
                )
            except Exception as exc:  # noqa: BLE001 - any failure: the next replica
                log.debug("ledger %d: batch read from %s at %d failed: %s", ledger.ledger_id, bookie, first, exc)
                continue
            got = []
            for entry_id, body in zip(range(first, last + 1), bodies):
                try:
                    entry = ledger.digest.verify(body, entry_id)
                except DigestError:
                    break  # the rest from the next replica
                got.append((entry.entry_id, entry.payload))
            if got:
                return got
        return []
