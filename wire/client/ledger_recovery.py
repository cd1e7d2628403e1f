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

from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.errors import DigestError
from bkctl.wire.metadata import LedgerMetadata

from .errors import (
    LedgerRecoveryError,
    Unauthorized,
)
from .ledger_handle import LedgerHandle
from .read_handle import _MISSING, ReadHandle, _describe, _ignore

__all__ = ["replicate_tail"]

log = logging.getLogger(__name__)


# ----------------------------------------------------------------- tail finding


def _tail_read(handle: ReadHandle, md: LedgerMetadata, entry_id: int, fence: bool) -> defer.Deferred:
    """Read ``entry_id`` from its whole write set at once.  Fires with
    ``(VerifiedEntry, raw bytes)`` from the first replica that has it, or None
    as soon as ``Qw - Qa + 1`` replicas said it is missing (so it can never have
    been acknowledged); fails when neither can be concluded.

    ``md`` is the metadata as it was before the tail search began: a bookie
    brought in by an ensemble change meanwhile has none of these entries and
    must not be counted as saying "missing"."""
    bookies = md.write_set(entry_id)
    need_missing = md.write_quorum - md.ack_quorum + 1
    result: defer.Deferred = defer.Deferred()
    state = {"pending": len(bookies), "missing": 0, "done": False}
    errors: list[BaseException] = []
    key = handle.master_key if fence else None

    def settle():
        if state["done"]:
            return
        if state["missing"] >= need_missing:
            state["done"] = True
            result.callback(None)
        elif state["pending"] == 0:
            state["done"] = True
            result.errback(LedgerRecoveryError(
                f"entry {entry_id} of ledger {handle.ledger_id} could not be read from any replica and "
                f"only {state['missing']} of {len(bookies)} said it is missing (need {need_missing}): "
                f"{_describe(errors)}"))

    def ok(body, bookie):
        state["pending"] -= 1
        if state["done"]:
            return
        try:
            entry = handle.digest.verify(body, entry_id)
        except DigestError as exc:
            errors.append(DigestError(f"bookie {bookie}: {exc}"))
            settle()
            return
        state["done"] = True
        result.callback((entry, bytes(body)))

    def bad(f: Failure, bookie):
        state["pending"] -= 1
        if state["done"]:
            return
        exc = f.value
        if isinstance(exc, _MISSING):
            state["missing"] += 1
        elif isinstance(exc, Unauthorized):
            state["done"] = True
            result.errback(exc)
            return
        else:
            errors.append(exc)
        settle()

    for bookie in bookies:
        try:
            d = handle.client.pool.get(bookie).read(handle.ledger_id, entry_id, fence_master_key=key,
                                                    high_priority=fence)
        except Exception as exc:  # noqa: BLE001
            d = defer.fail(exc)
        d.addCallbacks(ok, bad, callbackArgs=(bookie,), errbackArgs=(bookie,))
    return result


async def replicate_tail(handle: LedgerHandle, fence: bool) -> None:
    """Find the tail of ``handle``'s ledger and write it back to full write
    quorums through ``handle`` (recovery adds if ``handle.recovery``).

    Reads the LAC from the last ensemble (fencing with ``fence``), then reads
    forward from LAC + 1, a window of entries at a time, until an entry is
    declared missing; each entry found is added back in order.  Leaves the
    handle positioned after the last entry found, with nothing pending.
    """
    md = handle.metadata
    lac, lengths = await handle._read_lac_quorum(fence=fence)
    # Segments before the last one are complete: an ensemble change starts a
    # segment at the first entry not yet acknowledged.
    lac = max(lac, md.ensembles[-1][0] - 1)
    length = 0 if lac < 0 else lengths.get(lac)
    handle._resume_at(lac, length)
    window = max(1, int(getattr(handle.client, "recovery_read_window", 16)))
    reads: deque[tuple[int, defer.Deferred]] = deque()
    next_read = lac + 1
    found = 0
    try:
        while True:
            while len(reads) < window:
                reads.append((next_read, _tail_read(handle, md, next_read, fence)))
                next_read += 1
            entry_id, d = reads.popleft()
            got = await d
            if got is None:
                break
            entry, raw = got
            if not handle.writable():
                await handle.wait_writable()
            handle._add_packaged(entry_id, raw, entry.length).addErrback(_ignore)
            found += 1
    finally:
        for _entry_id, d in reads:
            d.addErrback(_ignore)
    await handle._drain()
    if found == 0 and handle._confirmed_length is None:
        handle._confirmed_length = (await handle._read_entry(lac)).length
        handle._length = handle._confirmed_length
    log.info("ledger %d: tail found: LAC %d, %d more entries re-replicated, last entry %d",
             handle.ledger_id, lac, found, handle.last_add_confirmed)
