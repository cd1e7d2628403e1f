"""Waiting for the next entry of an open ledger (Java's
``ReadLastConfirmedAndEntryOp``, in its parallel form): a long-poll LAC
read with the entry piggybacked (v3)."""

from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.errors import DigestError

from .errors import MISSING_ON_BOOKIE
from .readable_ledger import ReadableLedger

__all__ = ["LongPollRead"]

log = logging.getLogger(__name__)


class LongPollRead:
    """Every bookie of the last ensemble is asked to answer once its LAC
    passes ``entry_id - 1`` (or after ``timeout_ms``), adding that entry when
    it has it.  The first answer that moves the LAC completes the read
    (:meth:`start` fires with ``(lac, entry)``): with the entry
    (``(entry_id, payload)``) if it came along and verifies (its digest and
    id), else with None; the LACs answered are handed to the ledger
    (``learn_lac``).  Answers that do not move it (the wait ended), and a
    bookie's "no such ledger or entry" (nothing written to it yet), count
    as empty.  The polls still running are then cancelled.  Fails only when
    every bookie failed."""

    def __init__(self, ledger: ReadableLedger, entry_id: int, timeout_ms: int):
        self.ledger = ledger
        self.entry_id = entry_id
        self.timeout_ms = max(0, int(timeout_ms))
        self.result: defer.Deferred[Any] = defer.Deferred()
        self.polls: list[defer.Deferred[Any]] = []
        self.pending = self.asked = 0
        self.failed = 0
        self.done = False

    def start(self) -> defer.Deferred[Any]:
        ledger = self.ledger
        previous = self.entry_id - 1
        ensemble = ledger.metadata.last_ensemble
        self.pending = self.asked = len(ensemble)
        for bookie in ensemble:
            if self.done:  # answered already (a fake bookie, a refusal of every bookie...)
                break
            try:
                d = ledger.client.pool.get(bookie).read_long_poll(
                    ledger.ledger_id, previous, self.timeout_ms, piggyback=True
                )
            except Exception as exc:  # noqa: BLE001 - a closed pool and such
                d = defer.fail(exc)
            self.polls.append(d)
            d.addCallbacks(self._answered, self._failed, callbackArgs=(bookie,))
        return self.result

    def _finish(self, entry: Any) -> None:
        self.done = True
        polls, self.polls = self.polls, []
        self.result.callback((self.ledger.readable_limit(), entry))
        for d in polls:
            if not d.called:
                d.cancel()

    def _answered(self, answer: Any, bookie: str) -> None:
        self.pending -= 1
        if self.done:
            return
        max_lac, entry_id, body = answer
        ledger = self.ledger
        entry = None
        if body is not None and entry_id == self.entry_id:
            try:
                checked = ledger.digest.verify(body, self.entry_id)
            except DigestError as exc:  # that copy is not used; its LAC still counts
                log.info("ledger %d: long poll answer of bookie %s: %s", ledger.ledger_id, bookie, exc)
            else:
                entry = (checked.entry_id, checked.payload)
                # the bookie's LAC passed the entry before it, so the entry is confirmed
                ledger.learn_lac(max(checked.entry_id, checked.lac))
        if max_lac is not None:
            ledger.learn_lac(max_lac)
        if entry is not None or ledger.readable_limit() >= self.entry_id:
            self._finish(entry)
        elif self.pending == 0:
            self._finish(None)

    def _failed(self, f: Failure) -> None:
        self.pending -= 1
        if self.done:
            return
        if f.check(*MISSING_ON_BOOKIE):
            # A bookie that holds nothing of the ledger yet (no entry written, so
            # it never heard of it) answers at once: an empty answer, as Java's
            # op counts NoSuchLedger/NoSuchEntry, not a failure.
            if self.pending == 0:
                self._finish(None)
            return
        self.failed += 1
        if self.pending == 0:
            if self.failed == self.asked:  # nobody answered
                self.done = True
                self.polls = []
                self.result.errback(f)
            else:
                self._finish(None)
