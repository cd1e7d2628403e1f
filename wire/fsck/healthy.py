"""Many ledgers' fsck at once, with a fast path for the healthy small ledger.

:func:`check_ledgers` checks a batch of ledgers and fires once with every outcome.  A ledger
whose every bookie is read in place of its entry list (:meth:`.check.Plan.reads_first`: a ledger
of a few entries, or ``compare_all``) has its reads sent without a Deferred or a coroutine each
(:meth:`.check.BookieRequests.read_with_callback`), its answers kept per read: a bookie's run
of consecutive entries (one holding two entries of an E3/Qw2 ledger, or any with E == Qw) is
asked for with one BATCH_READ_ENTRY (:meth:`.check.BookieRequests.batch_read_with_callback`,
when the requests have v2 connections for it), and what its answer lacks -- entries past a
short answer, or every one when the bookie refuses, fails or lacks the first -- is read entry
by entry, so that the answers are those single reads would give.  When the last one is in, a ledger whose every copy was read, holds bytes equal to its replicas' and passes its
digest is healthy there and then: no finding, nothing else built.  Any other answer -- a copy
absent, unreadable or unanswered, bytes that differ or fail their digest, a bookie not
registered -- hands the answers to the general path (:func:`.check.held_from_reads`, then
:func:`.check.judged`), which names the cause exactly as :func:`.check.check_ledger` would from
the same answers.  Every other ledger is checked by :func:`.check.check_ledger` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from twisted.internet import defer
from twisted.python.failure import Failure

from .check import CheckOptions, Plan, check_ledger, closed_segments, digest_of, held_from_reads, judged
from .requests import NOTHING, BookieRequests

if TYPE_CHECKING:
    from bkctl.wire.metadata.ledger import LedgerMetadata

    from .check import Copy
    from .findings import Finding
    from .requests import Held

__all__ = ["LedgerToCheck", "Outcome", "check_ledgers"]


class LedgerToCheck(NamedTuple):
    """One ledger handed to :func:`check_ledgers`: its id, metadata and the metadata's version."""

    ledger_id: int
    metadata: LedgerMetadata
    version: int


class Outcome(NamedTuple):
    """One ledger's check: ``ok`` and its finding (None: healthy), or not ``ok`` and the failure."""

    ok: bool
    value: Finding | Failure | None


def check_ledgers(
    req: BookieRequests, items: Sequence[LedgerToCheck], options: CheckOptions, *, fast: bool = True
) -> defer.Deferred[list[Outcome]]:
    """Every ledger's :class:`Outcome`, in the order of ``items``, once all are checked.  With
    ``fast`` (the default; ``bkctl ledger fsck`` passes its client's ``twins.enabled``, so
    ``BKCTL_FASTPATHS=0`` turns it off), small ledgers go the fast path of this module's doc;
    without it each is checked by :func:`~.check.check_ledger` alone (the same findings: the
    tests run both)."""
    return _Batch(req, items, options, fast).done


class _Batch:
    __slots__ = ("outcomes", "left", "done")

    def __init__(self, req: BookieRequests, items: Sequence[LedgerToCheck], options: CheckOptions, fast: bool):
        self.outcomes: list[Outcome] = [Outcome(True, None)] * len(items)
        self.left = len(items) + 1  # one more until every ledger is started: no early fire
        self.done: defer.Deferred[list[Outcome]] = defer.Deferred()
        for index, item in enumerate(items):
            try:
                if fast and _Ledger.start(self, index, req, item, options):
                    continue
            except Exception:  # noqa: BLE001 - kept as the ledger's outcome
                self.settle(index, Outcome(False, Failure()))
                continue
            d = defer.ensureDeferred(check_ledger(req, item.ledger_id, item.metadata, item.version, options))
            d.addCallbacks(self.found, self.failed, callbackArgs=(index,), errbackArgs=(index,))
        self.settle_one()

    def found(self, finding: Finding | None, index: int) -> None:
        self.settle(index, Outcome(True, finding))

    def failed(self, failure: Failure, index: int) -> None:
        self.settle(index, Outcome(False, failure))

    def settle(self, index: int, outcome: Outcome) -> None:
        self.outcomes[index] = outcome
        self.settle_one()

    def settle_one(self) -> None:
        self.left -= 1
        if self.left == 0:
            self.done.callback(self.outcomes)


class _Ledger:
    """One small ledger's reads on the fast path: one answer slot a read, the batch told once
    the last is in."""

    __slots__ = ("batch", "index", "req", "item", "options", "plan", "reads", "answers", "left")

    def __init__(self, batch: _Batch, index: int, req: BookieRequests, item: LedgerToCheck, options: CheckOptions):
        self.batch, self.index, self.req, self.item, self.options = batch, index, req, item, options
        self.plan: Plan | None = None
        self.reads: list[tuple[str, int]] = []
        self.answers: list[bytes | BaseException | None] = []
        self.left = 0

    @classmethod
    def start(cls, batch: _Batch, index: int, req: BookieRequests, item: LedgerToCheck, options: CheckOptions) -> bool:
        """Send the ledger's reads when it goes the fast path (True); False: the general path's."""
        segments = closed_segments(item.metadata)
        if not segments:  # nothing any bookie should hold: no finding
            batch.settle(index, Outcome(True, None))
            return True
        plan = Plan(item.ledger_id, item.metadata, segments, options)
        if not plan.asked or not all(plan.reads_first(b) for b in plan.asked):
            return False
        ledger = cls(batch, index, req, item, options)
        ledger.plan = plan
        ledger.reads = [(b, e) for b in plan.asked for e in plan.expected[b]]
        ledger.answers = [None] * len(ledger.reads)
        ledger.left = len(ledger.reads)
        lid = item.ledger_id
        slot = 0
        for bookie in plan.asked:
            entries = plan.expected[bookie]
            if len(entries) == 1 or not req.batches(bookie):
                for entry_id in entries:
                    req.read_with_callback(bookie, lid, entry_id, _answered, ledger, slot)
                    slot += 1
                continue
            for first, count in _consecutive(entries):
                if count == 1:
                    req.read_with_callback(bookie, lid, first, _answered, ledger, slot)
                else:
                    req.batch_read_with_callback(bookie, lid, first, count, _batch_answered, (ledger, count), slot)
                slot += count
        return True

    def finish(self) -> None:
        try:
            if self._healthy():
                self.batch.settle(self.index, Outcome(True, None))
                return
        except Exception:  # noqa: BLE001 - kept as the ledger's outcome
            self.batch.settle(self.index, Outcome(False, Failure()))
            return
        d = defer.ensureDeferred(self._judged())
        d.addCallbacks(self.batch.found, self.batch.failed, callbackArgs=(self.index,), errbackArgs=(self.index,))

    def _healthy(self) -> bool:
        """Every copy read and in place, each sampled entry's copies the same bytes passing the
        ledger's digest: what :func:`~.check.judged` finds nothing wrong with."""
        plan = self.plan
        assert plan is not None
        if len(plan.asked) != len(plan.inside):  # a bookie not registered: its copies are missing
            return False
        by_entry: dict[int, list[bytes]] = {}
        for (_bookie, entry_id), body in zip(self.reads, self.answers):
            if type(body) is not bytes:
                return False
            if entry_id in plan.sampled:
                by_entry.setdefault(entry_id, []).append(body)
        digest = digest_of(self.item.ledger_id, self.item.metadata)
        for entry_id in plan.sample:
            bodies = by_entry.get(entry_id)
            if not bodies:
                return False
            first = bodies[0]
            for other in bodies[1:]:
                if other != first:
                    return False
            if digest is not None:
                try:
                    digest.verify(first, entry_id)  # the copies are the same bytes: one verify for all
                except Exception:  # noqa: BLE001 - judged by the general path
                    return False
        return True

    async def _judged(self) -> Finding | None:
        plan = self.plan
        assert plan is not None
        copies: dict[int, dict[str, Copy]] = {}
        held: dict[str, Held] = {b: NOTHING for b in plan.inside}
        silent: list[str] = []
        by_bookie: dict[str, list[tuple[int, Any]]] = {b: [] for b in plan.asked}
        for (bookie, entry_id), body in zip(self.reads, self.answers):
            by_bookie[bookie].append((entry_id, body))
        for bookie in plan.asked:
            held[bookie], answered = held_from_reads(bookie, by_bookie[bookie], copies)
            if not answered:
                silent.append(bookie)
        item = self.item
        return await judged(
            self.req, item.ledger_id, item.metadata, item.version, self.options, plan, held, silent, copies
        )


def _answered(ledger: _Ledger, slot: int, _bookie: str, result: Any) -> None:
    ledger.answers[slot] = result
    ledger.left -= 1
    if ledger.left == 0:
        ledger.finish()


def _batch_answered(ctx: tuple[_Ledger, int], slot: int, bookie: str, result: Any) -> None:
    """A batch read's answer: the entries it brought fill their slots; the rest of the run (all
    of it when it brought none) are read one by one."""
    ledger, count = ctx
    got = 0
    if type(result) is list:
        got = min(len(result), count)
        ledger.answers[slot : slot + got] = result[:got]
    ledger.left -= got
    if got == count:
        if ledger.left == 0:
            ledger.finish()
        return
    lid = ledger.item.ledger_id
    reads = ledger.reads
    for s in range(slot + got, slot + count):
        ledger.req.read_with_callback(bookie, lid, reads[s][1], _answered, ledger, s)


def _consecutive(entries: list[int]) -> list[tuple[int, int]]:
    """``entries`` (ascending) as runs of consecutive ids: (first, count) each."""
    runs: list[tuple[int, int]] = []
    first = prev = entries[0]
    for e in entries[1:]:
        if e != prev + 1:
            runs.append((first, prev - first + 1))
            first = e
        prev = e
    runs.append((first, prev - first + 1))
    return runs
