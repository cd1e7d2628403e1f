"""``bkctl ledger fsck``: every ledger (or those filtered) checked against what its bookies
hold, one finding per ledger with a cause (:mod:`bkctl.wire.fsck`), streamed in id order.

The metadata is read by the store's streaming walk in this thread; each ledger's check
runs in the reactor (:func:`bkctl.wire.fsck.check.check_ledger`), at most ``ledgers``
of them at once and at most ``requests`` bookie requests in flight over all of them.
What is kept between ledgers is the window of checks under way and the
under-replication marks (read first: as many as there are marks, not ledgers).

A run over every ledger also asks each registered bookie which ledgers it holds (bookied's
``/api/v1/bookie/list_ledgers``, before the walk) and reports those no metadata names
(``bookie_only``, :mod:`bkctl.wire.fsck.bookie_only`): kept meanwhile is one array of ids
per bookie.  A bookie that cannot answer (a Java bookie, no HTTP server) is "not checked".
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.client.pool import BookiePool
    from bkctl.wire.domain.ownership import Owners
    from bkctl.wire.fsck.bookie_only import BookieLists
    from bkctl.wire.fsck.check import BookieRequests, CheckOptions
    from bkctl.wire.fsck.findings import Finding
    from bkctl.wire.fsck.healthy import LedgerToCheck, Outcome
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from bkctl.wire.metadata.store import MetadataStore, WalkProgress

__all__ = ["FsckRun", "FsckTotals", "LIST_LEDGERS", "OwnerNames"]

#: bookied's listing of the ledgers a bookie holds (Java's bookie has none)
LIST_LEDGERS = "/api/v1/bookie/list_ledgers"
#: seconds a bookie may take to list its ledgers (a million ids)
LIST_TIMEOUT = 120.0


@dataclass
class FsckTotals:
    ledgers: int = 0
    findings: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    worst: int = 0
    seconds: float = 0.0
    bookie_requests: dict[str, int] = field(default_factory=dict)
    metadata_reads: int = 0
    #: bookies that did not answer entry lists (their entries were read one by one)
    unlisted: list[str] = field(default_factory=list)
    #: bookies whose batch reads failed (older than 4.17): their entries were read one by one
    unbatched: list[str] = field(default_factory=list)
    #: bookies not asked for the ledgers they hold, or that could not say: why (bookie_only
    #: not checked there); empty when the run is not over every ledger
    not_checked: dict[str, str] = field(default_factory=dict)

    def add(self, finding: Finding) -> None:
        self.findings += 1
        self.by_kind[finding.kind.value] = self.by_kind.get(finding.kind.value, 0) + 1
        self.worst = max(self.worst, int(finding.severity))

    def to_json(self) -> dict[str, Any]:
        return {
            "ledgers": self.ledgers,
            "findings": self.findings,
            "by_kind": dict(sorted(self.by_kind.items())),
            "seconds": round(self.seconds, 3),
            "bookie_requests": dict(self.bookie_requests),
            "metadata_reads": self.metadata_reads,
            "unlisted": self.unlisted,
            "unbatched": self.unbatched,
            "bookie_only_not_checked": dict(sorted(self.not_checked.items())),
        }


class FsckRun:
    """One fsck over ``bk`` (a :class:`~bkctl.wire.client.blocking.BlockingBookKeeper`) and
    its store.  ``ledger_ids``/``ranges``: only those (None: every ledger); ``bookie``: only
    ledgers naming it.  Iterate :meth:`findings`; :attr:`totals` is complete after."""

    def __init__(
        self,
        bk: BlockingBookKeeper,
        *,
        ledger_ids: list[int] | None = None,
        ranges: list[tuple[int, int]] | None = None,
        bookie: str | None = None,
        sample: int = 8,
        compare_all: bool = False,
        ledgers_in_flight: int = 32,
        requests_in_flight: int = 128,
        progress: WalkProgress | None = None,
    ) -> None:
        self.bk = bk
        self.store = bk.client.store
        self.ledger_ids = ledger_ids
        self.ranges = ranges or []
        self.bookie = bookie
        self.sample = sample
        self.compare_all = compare_all
        self.window = max(1, ledgers_in_flight)
        self.requests_in_flight = requests_in_flight
        self.progress = progress
        self.totals = FsckTotals()
        #: ledgers named one by one (not in a range) that have no metadata and no mark
        self.not_found: list[int] = []
        #: the bookies registered when the run started
        self.registered: frozenset[str] = frozenset()
        #: the v2 connections of the healthy ledgers' batch reads (closed when the run ends)
        self._batch_pool: BookiePool | None = None

    # -- which ledgers ---------------------------------------------------------
    def _filtered(self) -> bool:
        return self.ledger_ids is not None or bool(self.ranges)

    def _wanted(self, ledger_id: int) -> bool:
        if not self._filtered():
            return True
        return ledger_id in (self.ledger_ids or ()) or any(a <= ledger_id <= b for a, b in self.ranges)

    def _reads(self) -> Iterator:
        ledgers = self.store.ledgers
        naming = [self.bookie] if self.bookie else None
        if not self._filtered():
            if self.progress is not None and not self.bookie:  # with --bookie: how many is not known
                self.progress.update(total=ledgers.count())
            return ledgers.read_many(ledgers.ids(), naming=naming)
        ids = sorted(set(self.ledger_ids or ()))
        in_ranges = (i for i in ledgers.ids() if any(a <= i <= b for a, b in self.ranges)) if self.ranges else ()
        merged = sorted(set(ids).union(in_ranges))
        if self.progress is not None:
            self.progress.update(total=len(merged))
        return ledgers.read_many(merged, naming=naming)

    def bookie_lists(self, registered: frozenset[str]) -> BookieLists | None:
        """The ledgers each of ``registered`` holds, asked over its HTTP endpoint, an id list a
        bookie at a time (a run over every ledger only: None else); the bookies that cannot say
        go to :attr:`FsckTotals.not_checked`.  :meth:`findings` names the ledgers in them that
        no metadata names."""
        from array import array

        from bkctl.wire.fsck.bookie_only import BookieLists, listed_ids

        from .bookie_http import HTTP_FAILURES, http_address, read_chunks

        if self._filtered() or self.bookie:
            return None
        held: dict[str, array[int]] = {}
        for bookie in sorted(registered):
            try:
                # read into an array as the answer comes (8 bytes an id): neither the whole text
                # nor a list of ints (36 bytes an id) is ever held, only the arrays grow with the ledgers
                got = listed_ids(read_chunks(http_address(self.store, bookie), LIST_LEDGERS, timeout=LIST_TIMEOUT))
            except HTTP_FAILURES as exc:
                self.totals.not_checked[bookie] = str(exc)
            except (ValueError, OverflowError):
                self.totals.not_checked[bookie] = f"{LIST_LEDGERS} answered without a list of ledger ids"
            else:
                held[bookie] = got
        return BookieLists(held)

    def _read_again(self, ledger_id: int) -> tuple[LedgerMetadata, int] | None:
        """The ledger's metadata and version as they are now; None once it is deleted."""
        from bkctl.wire.metadata.errors import NoSuchLedger

        self.totals.metadata_reads += 1
        try:
            return self.store.ledgers.read(ledger_id)
        except NoSuchLedger:
            return None

    # -- the run -----------------------------------------------------------------
    def findings(self) -> Iterator:
        """Every finding, in ledger id order (marks of deleted ledgers last)."""
        try:
            yield from self._findings()
        finally:
            self._close_batch_pool()

    def _close_batch_pool(self) -> None:
        from bkctl.wire.client.blocking import run_in_reactor

        pool, self._batch_pool = self._batch_pool, None
        if pool is not None:
            run_in_reactor(pool.close)

    def _findings(self) -> Iterator:
        import crochet

        from bkctl.wire.autorecovery.lostentries import read_records
        from bkctl.wire.client.blocking import ensure_reactor, run_in_reactor
        from bkctl.wire.fsck.check import BookieRequests, CheckOptions, asks_bookies, confirm_lost
        from bkctl.wire.fsck.findings import Finding, Kind, Severity
        from bkctl.wire.metadata.registration_state import replica_targets
        from bkctl.wire.metadata.store import registered_bookies

        ensure_reactor()
        started = time.monotonic()
        client = self.bk.client
        registration = self.store.registration
        registered = self.registered = frozenset(registered_bookies(registration))
        targets = replica_targets(registration)
        marks = {m.ledger_id: m.replicas for m in self.store.underreplication.marks() if self._wanted(m.ledger_id)}
        # the entries autorecovery found no good copy of (bkctl.wire.autorecovery.lostentries): named
        recorded = {lid: r for lid, r in read_records(self.store).items() if self._wanted(lid)}
        seen_marked: set[int] = set()
        options = CheckOptions(registered, sample=self.sample, compare_all=self.compare_all, targets=targets)
        # the healthy ledgers' fast path is a Python fast path: on when the process's are
        # (bkctl.wire.fastpath's switch, BKCTL_FASTPATHS), so the suite checks both ways; it
        # batch-reads a bookie's consecutive entries over v2 connections of their own
        fast = client.twins.enabled
        if fast:
            self._batch_pool = run_in_reactor(client.pool.with_protocol, "v2")
        requests = run_in_reactor(BookieRequests, client.pool, self.requests_in_flight, self._batch_pool)
        check = crochet.run_in_reactor(_check_one)
        batches = _Batches(crochet.run_in_reactor(_check_many), requests, options, fast, max(1, self.window // 4))
        window: deque = deque()
        lists = self.bookie_lists(registered)
        held_only = crochet.run_in_reactor(_bookie_only_one)

        def bookie_only(passed: Iterable[tuple[int, list[str]]]) -> Iterator[Finding]:
            """Check the ledgers bookies hold that the walk passed without meeting."""
            for ledger_id, holders in passed:
                self.totals.metadata_reads += 1
                if self.store.ledgers.exists(ledger_id):  # created since it was listed: named after all
                    continue
                window.append((ledger_id, held_only(requests, ledger_id, holders), None))
                while len(window) >= self.window:
                    yield from settle(window.popleft())

        owners = OwnerNames(self.store)

        def check_again(ledger_id: int) -> Callable[[LedgerMetadata, int], Finding | None]:
            def checked(md_now: LedgerMetadata, version: int) -> Finding | None:
                pending: Any = check(requests, ledger_id, md_now, version, options)
                return pending.wait(None)  # as long as it takes: each request has its own timeout

            return checked

        def settle(item: tuple[int, Any, LedgerMetadata | None]) -> Iterator[Finding]:
            ledger_id, pending, md = item
            if isinstance(pending, _Slot) and not pending.batch.sent:
                batches.send()  # the oldest check waits in the batch being filled: hand it over now
            finding = pending if pending is None or isinstance(pending, Finding) else pending.wait(None)
            if finding is not None and finding.kind is Kind.BOOKIE_ONLY:  # not a ledger of the walk's
                self.totals.add(finding)
                yield finding
                return
            if finding is not None and md is not None:
                finding = confirm_lost(finding, lambda: self._read_again(ledger_id), check_again(ledger_id))
            if finding is not None and md is not None and finding.severity >= Severity.REPAIRABLE:
                finding = finding.with_owner(owners.name(ledger_id, md))
            self.totals.ledgers += 1
            if self.progress is not None:
                self.progress.advance(1)
            marked = marks.get(ledger_id)
            if marked is not None:
                seen_marked.add(ledger_id)
            if finding is None and marked is not None:
                finding = Finding(
                    ledger_id, Kind.MARKED_HEALTHY, "marked under-replicated, every copy in place", marked=marked
                )
            elif finding is not None and marked is not None:
                finding = finding.with_marked(marked)
            record = recorded.get(ledger_id)
            if finding is not None and record is not None and finding.kind is Kind.DATA_LOST:
                finding = finding.with_recorded(
                    f"autorecovery ({record.by}) recorded {record.count()} of them lost, the rest repaired"
                )
            if finding is not None:
                self.totals.add(finding)
                yield finding

        for read in self._reads():
            if lists is not None:
                yield from bookie_only(lists.passed(read.ledger_id))
            self.totals.metadata_reads += 1
            if read.metadata is None:  # deleted since it was listed, or named and not there
                if self.progress is not None:
                    self.progress.advance(1)
                if read.ledger_id in (self.ledger_ids or ()) and read.ledger_id not in marks:
                    self.not_found.append(read.ledger_id)
                continue
            if isinstance(read.metadata, Exception):
                window.append(
                    (
                        read.ledger_id,
                        Finding(read.ledger_id, Kind.BAD_METADATA, f"metadata does not decode: {read.metadata}"),
                        None,
                    )
                )
            else:
                if self.bookie and self.bookie not in read.metadata.bookies:  # named only in its custom metadata
                    continue
                # a ledger with nothing on the bookies (empty, or open in its first segment) is
                # judged here, not handed to the reactor and waited for (303 us a ledger at load 20)
                pending = batches.add(read) if asks_bookies(read.metadata) else None
                window.append((read.ledger_id, pending, read.metadata))
            while len(window) >= self.window:
                yield from settle(window.popleft())
        if lists is not None:
            yield from bookie_only(lists.rest())
        while window:
            yield from settle(window.popleft())
        for ledger_id, replicas in sorted(marks.items()):
            if ledger_id in seen_marked or (self.bookie and self.bookie not in replicas):
                continue
            self.totals.metadata_reads += 1
            if not self.store.ledgers.exists(ledger_id):
                finding = Finding(
                    ledger_id,
                    Kind.MARKED_DELETED,
                    "marked under-replicated, and the ledger is deleted",
                    marked=replicas,
                )
                self.totals.add(finding)
                yield finding
        self.totals.bookie_requests = dict(requests.sent)
        self.totals.unlisted = sorted(requests.unlisted)
        self.totals.unbatched = sorted(requests.unbatched)
        self.totals.seconds = time.monotonic() - started


class OwnerNames:
    """Who uses a damaged ledger, in a few words (:mod:`bkctl.wire.domain.ownership`'s rule: the
    topic whose data it holds, a cursor's, a schema's...), the managed ledgers read once a run;
    None for a ledger nothing of Pulsar's owns, or when Pulsar's metadata cannot be read."""

    def __init__(self, store: MetadataStore):
        self.store = store
        self._owners: Owners | None = None

    def name(self, ledger_id: int, md: LedgerMetadata) -> str | None:
        from bkctl.wire.domain.ownership import Owners

        try:
            if self._owners is None:
                self._owners = Owners(self.store)
            o = self._owners.owner_of(ledger_id, md)
        except Exception:  # noqa: BLE001 - naming the owner is a courtesy: the finding stands without it
            return None
        topic = o.topic or o.managed_ledger
        if o.owner == "topic":
            return f"topic {topic}"
        if o.owner == "cursor":
            return f"cursor {o.cursor} of topic {topic}"
        if o.owner == "orphan":
            return "a Pulsar ledger no topic lists (orphan)"
        if o.owner in (None, "not-pulsar"):
            return None
        return f"{o.owner}{f' of topic {topic}' if topic else ''}"


class _Batch:
    """Checks handed to the reactor together: one thread hop for many ledgers (a hop a ledger
    cost the walk's thread about as much CPU as reading the ledger's metadata)."""

    __slots__ = ("reads", "sent", "_eventual", "_outcomes")

    def __init__(self) -> None:
        self.reads: list[Any] = []
        self.sent = False
        self._eventual: Any = None
        self._outcomes: list[Outcome] | None = None

    def send(self, run: Any, requests: Any, options: Any, fast: bool) -> None:
        from bkctl.wire.fsck.healthy import LedgerToCheck

        items = [LedgerToCheck(r.ledger_id, r.metadata, r.version) for r in self.reads]
        self._eventual = run(requests, items, options, fast)
        self.sent = True

    def outcome(self, index: int) -> Any:
        if self._outcomes is None:
            self._outcomes = self._eventual.wait(None)  # as long as it takes: each request has its own timeout
        from twisted.python.failure import Failure

        outcome = self._outcomes[index]
        if isinstance(outcome.value, Failure):
            outcome.value.raiseException()
        return outcome.value


class _Slot:
    """One ledger's place in a :class:`_Batch`: what the window waits on."""

    __slots__ = ("batch", "index")

    def __init__(self, batch: _Batch, index: int) -> None:
        self.batch = batch
        self.index = index

    def wait(self, _timeout: float | None) -> Any:
        return self.batch.outcome(self.index)


class _Batches:
    """Fills a batch of ``size`` ledgers' checks and sends it whole (or sooner, when the window
    waits on one of its ledgers)."""

    def __init__(self, run: Any, requests: Any, options: Any, fast: bool, size: int) -> None:
        self.run, self.requests, self.options, self.fast, self.size = run, requests, options, fast, size
        self.filling = _Batch()

    def add(self, read: Any) -> _Slot:
        batch = self.filling
        batch.reads.append(read)
        slot = _Slot(batch, len(batch.reads) - 1)
        if len(batch.reads) >= self.size:
            self.send()
        return slot

    def send(self) -> None:
        if self.filling.reads:
            self.filling.send(self.run, self.requests, self.options, self.fast)
            self.filling = _Batch()


def _check_many(
    requests: BookieRequests, items: list[LedgerToCheck], options: CheckOptions, fast: bool
) -> Deferred[list[Outcome]]:
    from bkctl.wire.fsck.healthy import check_ledgers

    return check_ledgers(requests, items, options, fast=fast)


def _check_one(
    requests: BookieRequests, ledger_id: int, md: LedgerMetadata, version: int, options: CheckOptions
) -> Deferred[Finding | None]:
    from twisted.internet import defer

    from bkctl.wire.fsck.check import check_ledger

    return defer.ensureDeferred(check_ledger(requests, ledger_id, md, version, options))


def _bookie_only_one(requests: BookieRequests, ledger_id: int, holders: list[str]) -> Deferred[Finding]:
    from twisted.internet import defer

    from bkctl.wire.fsck.bookie_only import check_bookie_only

    return defer.ensureDeferred(check_bookie_only(requests, ledger_id, holders))


def fix_all(store: MetadataStore, findings: Iterable, fixes: set[str], dry_run: bool) -> Iterator[tuple[Any, Any]]:
    """``(finding, FixOutcome | None)`` for each finding: the fix applied when it is one of ``fixes``."""
    from bkctl.wire.fsck.fixes import apply_fix, fix_for

    for finding in findings:
        if not fixes:  # nothing to apply: not even which fix would do (a finding's marks are worked out)
            yield finding, None
            continue
        fix = fix_for(finding)
        if fix is None or fix.value not in fixes:
            yield finding, None
            continue
        yield finding, apply_fix(store, finding, fix, dry_run)
