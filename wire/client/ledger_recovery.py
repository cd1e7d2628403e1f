"""Finding the tail of an open ledger (Java's ``LedgerRecoveryOp``): ledger
recovery (fence, then close at the last entry found) and resuming a ledger
for appends.

Recovery and append-resume (:func:`replicate_tail`) find the tail of an open ledger the way
BookKeeper's LedgerRecoveryOp does: read the LAC from the last ensemble
(fencing it for recovery), then read forward from LAC + 1 until an entry
is declared missing by ``Qw - Qa + 1`` bookies of its write set, writing
every entry found back to its whole write set before going on.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.errors import DigestError
from bkctl.wire.metadata.ledger import LedgerMetadata

from .entry_reads import EntryRead
from .errors import (
    MISSING_ON_BOOKIE,
    LedgerRecoveryError,
    Unauthorized,
)
from .helpers import describe_errors, ignore_failure
from .ledger_handle import LedgerHandle
from .read_handle import ReadHandle
from .read_lac_quorum import ReadLacQuorum

__all__ = ["TailEntryRead", "replicate_tail"]

log = logging.getLogger(__name__)


# ----------------------------------------------------------------- tail finding


class TailEntryRead:
    """One entry of the tail, read from its whole write set at once.  Fires with
    ``(VerifiedEntry, raw bytes)`` from the first replica that has it, or None
    as soon as ``Qw - Qa + 1`` replicas said it is missing (so it can never have
    been acknowledged); fails when neither can be concluded.

    ``md`` is the metadata as it was before the tail search began: a bookie
    brought in by an ensemble change meanwhile has none of these entries and
    must not be counted as saying "missing"."""

    def __init__(self, handle: ReadHandle, md: LedgerMetadata, entry_id: int, fence: bool):
        self.handle = handle
        self.entry_id = entry_id
        self.fence = fence
        self.bookies = md.write_set(entry_id)
        self.need_missing = handle.schedule.answers_to_rule_out
        self.result: defer.Deferred[Any] = defer.Deferred()
        self.pending = len(self.bookies)
        self.missing = 0
        self.done = False
        self.errors: list[BaseException] = []

    def start(self) -> defer.Deferred[Any]:
        h = self.handle
        key = h.master_key if self.fence else None
        for bookie in self.bookies:
            try:
                d = h.client.pool.get(bookie).read(
                    h.ledger_id, self.entry_id, fence_master_key=key, high_priority=self.fence
                )
            except Exception as exc:  # noqa: BLE001
                d = defer.fail(exc)
            d.addCallbacks(self._answered, self._failed, callbackArgs=(bookie,), errbackArgs=(bookie,))
        return self.result

    def _settle(self) -> None:
        if self.done:
            return
        if self.missing >= self.need_missing:
            self.done = True
            self.result.callback(None)
        elif self.pending == 0:
            self.done = True
            self.result.errback(
                LedgerRecoveryError(
                    f"entry {self.entry_id} of ledger {self.handle.ledger_id} could not be read from any replica "
                    f"and only {self.missing} of {len(self.bookies)} said it is missing (need {self.need_missing}): "
                    f"{describe_errors(self.errors)}"
                )
            )

    def _answered(self, body: Any, bookie: str) -> None:
        self.pending -= 1
        if self.done:
            return
        try:
            entry = self.handle.digest.verify(body, self.entry_id)
        except DigestError as exc:
            self.errors.append(DigestError(f"bookie {bookie}: {exc}"))
            self._settle()
            return
        self.done = True
        self.result.callback((entry, bytes(body)))

    def _failed(self, f: Failure, bookie: str) -> None:
        self.pending -= 1
        if self.done:
            return
        exc = f.value
        if isinstance(exc, MISSING_ON_BOOKIE):
            self.missing += 1
        elif isinstance(exc, Unauthorized):
            self.done = True
            self.result.errback(exc)
            return
        else:
            self.errors.append(exc)
        self._settle()


async def replicate_tail(handle: LedgerHandle, fence: bool) -> None:
    """Find the tail of ``handle``'s ledger and write it back to full write
    quorums through ``handle`` (recovery adds if ``handle.recovery``).

    Reads the LAC from the last ensemble (fencing with ``fence``), then reads
    forward from LAC + 1, a window of entries at a time, until an entry is
    declared missing; each entry found is added back in order.  Leaves the
    handle positioned after the last entry found, with nothing pending.
    """
    md = handle.metadata
    lac, lengths = await ReadLacQuorum(handle, fence).start()
    # Segments before the last one are complete: an ensemble change starts a
    # segment at the first entry not yet acknowledged.
    lac = max(lac, md.ensembles[-1][0] - 1)
    length = 0 if lac < 0 else lengths.get(lac)
    handle.resume_at(lac, length)
    window = max(1, int(getattr(handle.client, "recovery_read_window", 16)))
    reads: deque[tuple[int, defer.Deferred[Any]]] = deque()
    next_read = lac + 1
    found = 0
    try:
        while True:
            while len(reads) < window:
                reads.append((next_read, TailEntryRead(handle, md, next_read, fence).start()))
                next_read += 1
            entry_id, d = reads.popleft()
            got = await d
            if got is None:
                break
            entry, raw = got
            if not handle.writable():
                await handle.wait_writable()
            handle.add_packaged(entry_id, raw, entry.length).addErrback(ignore_failure)
            found += 1
    finally:
        for _entry_id, d in reads:
            d.addErrback(ignore_failure)
    await handle.drain()
    if found == 0 and handle.length is None:
        handle.confirm_length((await EntryRead(handle, lac).start()).length)
    log.info(
        "ledger %d: tail found: LAC %d, %d more entries re-replicated, last entry %d",
        handle.ledger_id,
        lac,
        found,
        handle.last_add_confirmed,
    )
