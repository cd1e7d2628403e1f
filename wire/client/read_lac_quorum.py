"""Reading the last add confirmed of an open ledger from its last ensemble
(Java's ``ReadLastConfirmedOp``, and over v3 ``PendingReadLacOp``'s explicit
LAC): the read recovery fences with, and a reader's LAC refresh."""

from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.errors import DigestError

from .errors import MISSING_ON_BOOKIE, LedgerRecoveryError, Unauthorized
from .helpers import describe_errors
from .readable_ledger import ReadableLedger

__all__ = ["ReadLacQuorum"]

log = logging.getLogger(__name__)


class ReadLacQuorum:
    """One LAC read: every bookie of the last ensemble is asked for its last
    entry (its piggybacked LAC, and over v3 the explicit LAC; with ``fence``
    a fencing read of the last entry); :meth:`start` fires with ``(max
    piggybacked LAC, {entry_id: length})`` once the answers cover every
    write quorum (:meth:`~.quorum.QuorumSchedule.covered`), and fails when
    all answered without covering them.  A missing ledger or entry is a
    valid, empty answer; a wrong password fails the read at once."""

    def __init__(self, ledger: ReadableLedger, fence: bool):
        self.ledger = ledger
        self.fence = fence
        self.ensemble = ledger.metadata.last_ensemble
        self.use_read_lac = not fence and ledger.client.protocol == "v3"
        self.result: defer.Deferred[Any] = defer.Deferred()
        self.pending = len(self.ensemble)
        self.lac = -1
        self.done = False
        self.responded: set[int] = set()
        self.lengths: dict[int, int] = {}
        self.errors: list[BaseException] = []

    def start(self) -> defer.Deferred[Any]:
        ledger = self.ledger
        for index, bookie in enumerate(self.ensemble):
            try:
                conn = ledger.client.pool.get(bookie)
                if self.fence:
                    d = conn.read(ledger.ledger_id, -1, fence_master_key=ledger.master_key, high_priority=True)
                elif self.use_read_lac:
                    d = conn.read_lac(ledger.ledger_id)
                else:
                    d = conn.read(ledger.ledger_id, -1)
            except Exception as exc:  # noqa: BLE001 - a closed pool and such
                d = defer.fail(exc)
            d.addCallbacks(self._answered, self._failed, callbackArgs=(index,), errbackArgs=(index,))
            d.addErrback(lambda f: log.error("LAC read bookkeeping failed: %s", f.getTraceback()))
        return self.result

    def _settle(self) -> None:
        if self.done:
            return
        schedule = self.ledger.schedule
        if self.responded and schedule.covered(self.responded):
            self.done = True
            self.result.callback((self.lac, self.lengths))
        elif self.pending == 0:
            self.done = True
            self.result.errback(
                LedgerRecoveryError(
                    f"could not read the last add confirmed of ledger {self.ledger.ledger_id}: "
                    f"{len(self.responded)} of {schedule.ensemble_size} bookies answered, but every write "
                    f"quorum needs {schedule.answers_to_rule_out} answers ({describe_errors(self.errors)})"
                )
            )

    def _take_entry(self, body: bytes) -> None:
        entry = self.ledger.digest.verify(body, None)
        self.lac = max(self.lac, entry.lac)
        self.lengths[entry.entry_id] = entry.length

    def _answered(self, value: Any, index: int) -> None:
        self.pending -= 1
        try:
            if self.use_read_lac:
                lac_body, last_entry = value
                if lac_body:
                    self.lac = max(self.lac, self.ledger.digest.verify_lac(lac_body))
                if last_entry:
                    self._take_entry(last_entry)
            else:
                self._take_entry(value)
        except DigestError as exc:
            self.errors.append(exc)
        else:
            self.responded.add(index)
        self._settle()

    def _failed(self, f: Failure, index: int) -> None:
        self.pending -= 1
        exc = f.value
        if isinstance(exc, MISSING_ON_BOOKIE):
            self.responded.add(index)  # nothing written there: a valid, empty answer
        elif isinstance(exc, Unauthorized):
            if not self.done:
                self.done = True
                self.result.errback(exc)
            return
        else:
            self.errors.append(exc)
        self._settle()
