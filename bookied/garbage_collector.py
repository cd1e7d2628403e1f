"""The bookie's garbage collection, as Java's GarbageCollectorThread.

Every ``gcWaitTime`` a pass removes the ledgers whose metadata is gone from the
entry stores (:class:`DeletedLedgerCollector` decides which; logs left without
live entries go at once, and a log emptied while it was written once it has
rolled: Java's doGcEntryLogs), then, as Java:

* **major compaction** when ``majorCompactionInterval`` seconds have passed
  since the last one (or the pass is forced), for the logs whose live fraction
  is below ``majorCompactionThreshold``, for at most
  ``majorCompactionMaxTimeMillis``;
* otherwise **minor compaction** likewise with the minor keys;
* otherwise, bookied's own rules, a compaction of the rolled logs of at least half of
  ``logSizeLimit`` (:func:`nearly_empty_size`) whose live fraction is below
  ``nearlyEmptyCompactionThreshold`` (and the minor threshold): a few entries moved give back
  nearly a whole log, where Java keeps it until the next minor compaction; or that are settled,
  below ``settledCompactionThreshold`` with live bytes unchanged for three passes
  (:class:`~.gc_policy.SettledLogs`, :meth:`~.gc_policy.GcPolicy.takes_at_every_pass`). It
  restarts neither interval and is counted apart (``nearlyEmptyCompactionCounter``).

Each compaction takes next the log that is emptiest when it gets to it, not when it began, and
the logs that turn nearly empty or settled meanwhile join it (:meth:`GarbageCollector._in_order`).

While a compaction runs longer than ``gcWaitTime`` (its rate limit makes a
mostly-live log take seconds), the deleted ledgers are collected again between
two logs or two batches of one log, so that logs their deletion empties go
then rather than after the whole compaction, and the entries of ledgers
deleted meanwhile are not copied (Java's single GC thread leaves them until
its next pass).
Logs deleted whole are counted apart from logs compacted (``logsDeleted`` and
``reclaimedSpaceViaDeletes`` against ``logsCompacted`` and
``reclaimedSpaceViaCompaction``).

An interval or threshold of 0 disables that kind; ``forceAllowCompaction``
still lets a forced pass (HTTP ``PUT /api/v1/bookie/gc``) run it. Compaction
copies at ``compactionRateByEntries`` entries/s (or ``compactionRateByBytes``
with ``isThrottleByBytes``), switching the index every
``compactionMaxOutstandingRequests`` entries (:mod:`bookied.storage.compactor`).

Disk pressure, as Java's LedgerDirsListener: over ``diskUsageWarnThreshold``
major compaction is suspended, over ``diskUsageThreshold`` both kinds are
(compaction needs room for the copies) -- unless ``isForceGCAllowWhenNoSpace``:
then a forced pass runs at once instead, and on a full disk with the rate and
time limits lifted, so that a full bookie can free itself and turn writable.
As Java's ``allDisksFull`` does, every disk check that still finds the disk
full asks for another forced pass once the last one is over: what a pass could
not reclaim (entries still in the write cache, ledgers deleted since) is taken
by the next, not left until ``gcWaitTime``.

The passes run in a thread pool (``run_in_thread``), one at a time; the
scheduling and the figures live in the reactor thread (``clock`` is the
reactor, ``task.Clock`` in tests).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from twisted.internet import defer

from .errors import GcListingStopped
from .gc_policy import MAJOR, MINOR, NEARLY_EMPTY, GcPolicy, SettledLogs, choose_compaction
from .storage.compactor import CompactableStore, CompactionStopped, EntryLogCompactor, Throttle

log = logging.getLogger("bookied.gc")

#: what the collector is doing (``state`` in its status, ``bookie_gc_state`` in the metrics)
IDLE = "idle"
COLLECTING = "collecting"  # removing deleted ledgers
COMPACTING = {MAJOR: "major compacting", MINOR: "minor compacting", NEARLY_EMPTY: "nearly empty compacting"}
STATES = (IDLE, COLLECTING, COMPACTING[MINOR], COMPACTING[MAJOR], COMPACTING[NEARLY_EMPTY])


#: how many of the damaged records met are kept for the status (the metric counts them all)
DAMAGED_KEPT = 20


@dataclass
class PassResult:
    ledgers_removed: int = 0
    compaction: str | None = None
    logs_compacted: int = 0
    entries_moved: int = 0
    bytes_moved: int = 0
    reclaimed_by_compaction: int = 0
    damaged: list = field(default_factory=list)  # (directory, DamagedFound)
    not_reclaimed: dict = field(default_factory=dict)  # (directory, log id) -> why
    candidates: int = 0  # logs below the threshold when compaction began
    stopped_by: str | None = None  # why compaction ended before every candidate was compacted
    throttled_ms: int = 0  # time spent waiting for the rate limit


def damaged_doc(directory: str, found) -> dict:
    """A damaged record as the status shows it (Java-style camelCase keys)."""
    rec = found.record
    return {
        "ledgerDirectory": directory,
        "logId": found.log_id,
        "offset": rec.offset,
        "length": rec.length,
        "ledgerId": rec.ledger_id,
        "entryId": rec.entry_id,
        "reason": rec.reason,
        "droppedEntries": [list(ids) for ids in found.dropped],
    }


def nearly_empty_size(log_size_limit: int) -> int:
    """The least size of a log the nearly-empty rule compacts: half of logSizeLimit. The logs a
    compaction writes are as small as what it moved; compacting them again as their entries
    die would move the same short-lived entries over and over for little space."""
    return log_size_limit // 2


def _fire_with(waiter: defer.Deferred[Any], *, with_result: bool = True) -> Callable[[object], object]:
    """A callback that fires ``waiter`` with the result it gets (or None), and passes the result on."""

    def fire(result: object) -> object:
        waiter.callback(result if with_result else None)
        return result

    return fire


class GarbageCollector:
    """Schedules the GC passes of the bookie's entry stores and keeps their figures (Java's
    GarbageCollectorThread, which is a thread; here the passes run in the reactor's pool).

    ``collect_ledgers(stores)`` (in a pool thread) deletes the ledgers of ``stores``
    whose metadata is gone and returns how many; ``run_in_thread(fn)`` returns a
    Deferred of ``fn()`` run in a pool thread; ``on_pass_done()`` is called after
    each pass (the bookie looks at its disks again).
    """

    __name__ = "gc"  # for the periodic runner's log lines

    def __init__(
        self,
        policy: GcPolicy,
        stores: Sequence[CompactableStore],
        collect_ledgers: Callable[[Sequence[CompactableStore]], int],
        clock,
        run_in_thread: Callable[[Callable], defer.Deferred],
        on_pass_done: Callable[[], None] | None = None,
        throttle: Throttle | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self.policy = policy
        #: the seconds a pass's compaction measures (gcWaitTime between logs and batches, the max times)
        self._monotonic = monotonic
        self.stores = stores
        self._collect = collect_ledgers
        self.clock = clock
        self._run_in_thread = run_in_thread
        self._on_pass_done = on_pass_done
        self.throttle = throttle if throttle is not None else policy.throttle()
        started = self._now_ms()
        self.last_major_ms = self.last_minor_ms = started  # Java counts the intervals from start
        self.force_gc = False  # Java's forceGarbageCollection: the next pass is forced
        self.pressure: str | None = None  # what the last disk check found: None, "warn" or "full"
        self.suspend_major = self.suspend_minor = False
        self.no_space = False  # forced by a full disk: limits lifted
        self.running: defer.Deferred | None = None
        self.compacting: str | None = None  # MAJOR, MINOR or NEARLY_EMPTY while compaction itself runs
        self.state = IDLE
        self._forced_now = False
        self._waiters: list[defer.Deferred] = []
        self._pending: tuple[bool, bool, bool] | None = None
        self.stopped = False
        # figures
        self.runs = 0
        self.ledgers_removed = 0
        self.major_count = self.minor_count = 0
        self.nearly_empty_count = 0  # compactions of the nearly empty logs only (bookied's rule)
        self.entries_moved = self.bytes_moved = 0
        self.reclaimed_by_compaction = 0
        self.logs_compacted = 0
        self._collected_at = 0.0  # time.monotonic() of the last collection of deleted ledgers
        self.settled = SettledLogs()  # since when each log's live bytes are unchanged
        self.last_run_ms: int | None = None
        self.last_run_duration_ms: int | None = None  # of the last pass, collecting and compacting
        self._started_ms = 0
        self.last_compaction: dict | None = None  # the last compaction that reclaimed space
        self.last_compaction_run: dict | None = None  # the last compaction, whatever it reclaimed
        self.damaged_count = 0
        self.damaged: list[dict] = []  # the last DAMAGED_KEPT damaged records met, oldest first
        self._damaged_seen: set[tuple[str, int, int]] = set()
        self.not_reclaimed: dict[tuple[str, int], str] = {}  # (directory, log id) -> why
        self.next_run_ms: int | None = started + policy.gc_wait_ms

    def _now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    @property
    def logs_deleted(self) -> int:
        """Entry logs deleted whole (no live entry left in them), since the bookie started."""
        return sum(store.deleted_whole[0] for store in self.stores)

    @property
    def reclaimed_by_deletion(self) -> int:
        """Their bytes (Java's reclaimedSpaceViaDeletes): the stores count them as they unlink
        them, so a flush that grows a log meanwhile cannot hide them."""
        return sum(store.deleted_whole[1] for store in self.stores)

    # -- triggers
    def __call__(self) -> defer.Deferred:
        """The periodic pass (every gcWaitTime)."""
        self.next_run_ms = self._now_ms() + self.policy.gc_wait_ms
        return self.run(self.force_gc, self.suspend_major, self.suspend_minor)

    def trigger(self, force_major: bool | None = None, force_minor: bool | None = None) -> defer.Deferred:
        """A forced pass (Java's enableForceGC): without arguments compaction as the disk
        state allows; with them, only the kinds asked for."""
        if force_major is None and force_minor is None:
            return self.run(True, self.suspend_major, self.suspend_minor)
        return self.run(True, not force_major, not force_minor)

    def run(self, force: bool, suspend_major: bool, suspend_minor: bool) -> defer.Deferred:
        """Start a pass, or queue one after the running pass (flags merged); fires when it is over."""
        d: defer.Deferred[object] = defer.Deferred()
        if self.stopped:
            d.callback(None)
            return d
        if self.running is not None:
            if self._pending is None:
                self._pending = (force, suspend_major, suspend_minor)
            else:
                f, sm, sn = self._pending
                self._pending = (f or force, sm and suspend_major, sn and suspend_minor)
            self._waiters.append(d)
            return d
        self._start(force, suspend_major, suspend_minor).addBoth(_fire_with(d))
        return d

    def _start(self, force: bool, suspend_major: bool, suspend_minor: bool) -> defer.Deferred:
        """Run a pass in a thread: :attr:`running`, returned."""
        kind = choose_compaction(
            self.policy, self._now_ms(), self.last_major_ms, self.last_minor_ms, force, suspend_major, suspend_minor
        )
        lifted = self.no_space and force
        self._forced_now = force
        self._started_ms = self._now_ms()
        self.state = COLLECTING
        if force:
            log.info("garbage collection forced%s", " (disk full: compaction limits lifted)" if lifted else "")
        nearly_empty = not suspend_minor
        self.running = d = self._run_in_thread(lambda: self._pass(kind, lifted, nearly_empty))
        d.addCallbacks(self._done, self._failed, callbackArgs=(force,), errbackArgs=(kind, force))
        return d

    def collect_deleted(self) -> defer.Deferred:
        """A pass that removes the deleted ledgers and compacts nothing, now (or after the running
        pass): a checkpoint postponed for want of room asks for it (:mod:`.upkeep`), since a deleted
        ledger's entries still in the write cache are what it would write, and with the journal they
        keep, what keeps the disk full.  Fires with the pass's :class:`PassResult` (None if stopped)."""
        return self.run(False, True, True)

    # -- disk pressure (Java's LedgerDirsListener)
    def disk_full(self) -> None:
        """Over diskUsageThreshold (called at every disk check, as Java's allDisksFull): a
        forced pass with the limits lifted unless one is under way, or no compaction at all."""
        self.pressure = "full"
        if self.policy.force_when_no_space:
            self.no_space = True
            self._enable_force_gc()
        else:
            self.suspend_major = self.suspend_minor = True

    def disk_almost_full(self) -> None:
        """Over diskUsageWarnThreshold: a forced pass when the disk turns almost full (Java's
        diskAlmostFull, once per change), or no major compaction."""
        changed, self.pressure = self.pressure != "warn", "warn"
        self.no_space = False
        if self.policy.force_when_no_space:
            if changed:
                self._enable_force_gc()
        else:
            self.suspend_major = True
            self.suspend_minor = False

    def disk_writable(self) -> None:
        self.pressure = None
        self.no_space = self.force_gc = False
        self.suspend_major = self.suspend_minor = False

    def _enable_force_gc(self) -> None:
        """Java's enableForceGC: a forced pass now, unless one is asked for or running
        (the flag drops when a forced pass ends, so the next call asks again)."""
        if not self.force_gc and not (self.running is not None and self._forced_now):
            self.force_gc = True
            self.trigger()

    # -- the pass (pool thread)
    def _pass(self, kind: str | None, lifted: bool, nearly_empty: bool = True) -> PassResult:
        """``nearly_empty``: without a compaction of Java's, compact the nearly empty logs."""
        result = PassResult(compaction=kind)
        self._collect_deleted(result)
        if kind is None and nearly_empty and any(self._every_pass_candidates(store) for store in self.stores):
            kind = result.compaction = NEARLY_EMPTY
        if kind is None:
            return result
        self.compacting, self.state = kind, COMPACTING[kind]  # plain assignments, read by the reactor thread
        slept = self.throttle.slept
        try:
            return self._compact(kind, lifted, result, nearly_empty)
        finally:
            result.throttled_ms = int((self.throttle.slept - slept) * 1000)
            self.compacting = None

    def _collect_deleted(self, result: PassResult) -> None:
        """Delete the ledgers whose metadata is gone, then the logs left without a live entry."""
        self._collected_at = self._monotonic()
        result.ledgers_removed += self._collect(self.stores)
        for store in self.stores:
            store.delete_empty_logs()
            usage = store.log_usage()
            self.settled.observe(store.directory, {lid: u.live_bytes for lid, u in usage.items()}, self.clock.seconds())

    def _every_pass_candidates(self, store: CompactableStore) -> list[tuple[int, float]]:
        """The rolled logs of ``store`` a pass without a compaction of Java's takes, emptiest
        first: nearly empty, or settled (after the collection: a log left without a live entry
        is gone already)."""
        policy = self.policy
        below = max(policy.nearly_empty_below, policy.settled_below)
        if below <= 0:
            return []
        now = self.clock.seconds()
        return [
            (log_id, usage)
            for log_id, usage in store.compaction_candidates(below, nearly_empty_size(store.log_size_limit))
            if policy.takes_at_every_pass(usage, self.settled.unchanged_ms(store.directory, log_id, now))
        ]

    def _collect_if_due(self, result: PassResult) -> None:
        """In a compaction running longer than gcWaitTime (between two logs, or two batches
        of one): collect the deleted ledgers again."""
        if (self._monotonic() - self._collected_at) * 1000 >= self.policy.gc_wait_ms:
            self._collect_deleted(result)

    def _compact(self, kind: str, lifted: bool, result: PassResult, every_pass: bool = True) -> PassResult:
        """Compact the candidates of ``kind``, one log at a time in :meth:`_in_order`
        (``every_pass``: the nearly-empty and settled logs join them as they turn so)."""
        policy = self.policy
        threshold, max_ms = (
            (policy.major_threshold, policy.major_max_ms)
            if kind == MAJOR
            else (max(policy.nearly_empty_below, policy.settled_below), policy.minor_max_ms)
            if kind == NEARLY_EMPTY
            else (policy.minor_threshold, policy.minor_max_ms)
        )
        if lifted:
            max_ms = -1
        self.throttle.lifted = lifted
        started = self._monotonic()
        log.info("%s compaction of entry logs below %g live", kind, threshold)
        try:
            for store in self.stores:
                with EntryLogCompactor(
                    store, self.throttle, policy.max_outstanding, between=lambda: self._collect_if_due(result)
                ) as compactor:
                    candidates = (
                        self._every_pass_candidates(store)
                        if kind == NEARLY_EMPTY
                        else store.compaction_candidates(threshold)
                    )
                    result.candidates += len(candidates)
                    for log_id in self._in_order(store, candidates, every_pass, result):
                        if max_ms > 0 and (self._monotonic() - started) * 1000 >= max_ms:
                            log.info(
                                "%s compaction stopped after %d ms (%sCompactionMaxTimeMillis)", kind, max_ms, kind
                            )
                            result.stopped_by = f"{kind}CompactionMaxTimeMillis ({max_ms} ms) ran out"
                            return result
                        self._collect_if_due(result)
                        if not store.log_size(log_id):
                            continue  # deleted whole meanwhile: its ledgers are gone
                        try:
                            moved = compactor.compact(log_id)
                        except OSError as e:  # this log only: the others may still be reclaimed
                            why = f"compaction failed: {e}"
                            log.error("%s: entry log %d not reclaimed: %s", store.directory, log_id, why)
                            result.not_reclaimed[(store.directory, log_id)] = why
                            continue
                        result.logs_compacted += moved.deleted
                        result.entries_moved += moved.moved_entries
                        result.bytes_moved += moved.moved_bytes
                        result.reclaimed_by_compaction += moved.reclaimed_bytes
                        result.damaged.extend((store.directory, found) for found in moved.damaged)
                        if not moved.deleted and not moved.dead:  # dead: deleted whole, not compacted
                            usage_now = store.log_usage().get(log_id)
                            left = 0 if usage_now is None else usage_now.live_entries
                            result.not_reclaimed[(store.directory, log_id)] = (
                                f"{left} live entries still in it after compaction (written again meanwhile?)"
                            )
        except CompactionStopped:
            log.info("%s compaction stopped: the bookie is shutting down", kind)
            result.stopped_by = "the bookie is shutting down"
        finally:
            self.throttle.lifted = False
        return result

    def _in_order(self, store: CompactableStore, candidates: list, every_pass: bool, result: PassResult):
        """The logs to compact next, each the emptiest of those left as it is *now*: a long
        compaction (the rate limit makes a mostly-live log take seconds) leaves a young log's
        short-lived ledgers time to die, so that it is cheaper when its turn comes, or gone
        whole. With ``every_pass`` the logs that turn nearly empty or settled meanwhile join
        (no pass of their own runs while this one does). Each log comes once."""
        left = {log_id for log_id, _usage in candidates}
        done: set[int] = set()
        while True:
            if every_pass:
                for log_id, _usage in self._every_pass_candidates(store):
                    if log_id not in left and log_id not in done:
                        left.add(log_id)
                        result.candidates += 1
            if not left:
                return
            usage = store.log_usage()
            log_id = min(left, key=lambda lid: (usage[lid].live_fraction if lid in usage else -1.0, lid))
            left.discard(log_id)
            done.add(log_id)
            yield log_id

    # -- bookkeeping (reactor thread)
    def _finish(self) -> None:
        self.running = None
        self.compacting = None
        self.state = IDLE
        self._forced_now = False
        if self._on_pass_done is not None and not self.stopped:
            self._on_pass_done()
        if self._pending is not None and not self.stopped:
            flags, self._pending = self._pending, None
            waiters, self._waiters = self._waiters, []
            running = self._start(*flags)
            for w in waiters:
                running.addBoth(_fire_with(w))
        else:
            waiters, self._waiters = self._waiters, []
            for w in waiters:
                w.callback(None)

    def _done(self, result: PassResult, force: bool) -> PassResult:
        kind = result.compaction
        now = self._now_ms()
        self.runs += 1
        self.last_run_ms = now
        self.last_run_duration_ms = now - self._started_ms
        self.ledgers_removed += result.ledgers_removed
        self._note_damaged(result.damaged)
        if kind is not None:
            self.not_reclaimed = result.not_reclaimed
        if result.ledgers_removed:
            log.info("garbage collection removed %d deleted ledger(s)", result.ledgers_removed)
        if kind is not None:
            if kind == NEARLY_EMPTY:  # restarts neither interval
                self.nearly_empty_count += 1
            else:
                if kind == MAJOR:
                    self.major_count += 1
                    self.last_major_ms = now
                else:
                    self.minor_count += 1
                self.last_minor_ms = now  # a major compaction also restarts the minor interval
            self.entries_moved += result.entries_moved
            self.bytes_moved += result.bytes_moved
            self.reclaimed_by_compaction += result.reclaimed_by_compaction
            self.logs_compacted += result.logs_compacted
            self.last_compaction_run = {
                "kind": kind,
                "timeMs": now,
                "logsCompacted": result.logs_compacted,
                "entriesMoved": result.entries_moved,
                "bytesMoved": result.bytes_moved,
                "reclaimedBytes": result.reclaimed_by_compaction,
                "candidateLogs": result.candidates,
                "stoppedBy": result.stopped_by,
                "throttledMs": result.throttled_ms,
            }
            if result.reclaimed_by_compaction > 0:
                self.last_compaction = self.last_compaction_run
            log.info(
                "%s compaction: %d log(s) compacted, %d entries (%d bytes) moved, %d bytes reclaimed",
                kind,
                result.logs_compacted,
                result.entries_moved,
                result.bytes_moved,
                result.reclaimed_by_compaction,
            )
        self._end_pass(force)
        return result

    def _note_damaged(self, damaged: list) -> None:
        """Report each damaged record once (WARN, with its log and offset) and count it."""
        for directory, found in damaged:
            key = (directory, found.log_id, found.record.offset)
            if key in self._damaged_seen:
                continue
            self._damaged_seen.add(key)
            self.damaged_count += 1
            doc = damaged_doc(directory, found)
            self.damaged = (self.damaged + [doc])[-DAMAGED_KEPT:]
            rec = found.record
            claims = f", header says entry {rec.ledger_id}/{rec.entry_id}" if rec.ledger_id is not None else ""
            dropped = (
                (
                    "; live entries dropped from this bookie (never served; other replicas hold them): "
                    + ", ".join(f"{lid}/{eid}" for lid, eid in found.dropped)
                )
                if found.dropped
                else "; no live entry in it"
            )
            log.warning(
                "%s: damaged record in entry log %d at offset %d (%d bytes, %s%s)%s; compaction went on past it",
                directory,
                found.log_id,
                rec.offset,
                rec.length,
                rec.reason,
                claims,
                dropped,
            )

    def _failed(self, failure, kind: str | None, force: bool):
        if failure.check(GcListingStopped):
            log.info("garbage collection stopped: %s", failure.getErrorMessage())
        else:
            log.error("garbage collection failed: %s", failure.getErrorMessage())
        self._end_pass(force)
        return None

    def _end_pass(self, force: bool) -> None:
        self._finish()  # looks at the disks at once: a full disk asks for no pass yet (force_gc holds)...
        if force and not (self.running is not None and self._forced_now):
            self.force_gc = False  # ...the next periodic disk check that still finds it full does

    def shutdown(self) -> defer.Deferred:
        """Stop: cancel the throttle's waits; fires once the running pass is over."""
        self.stopped = True
        self.throttle.cancel()
        self._pending = None
        if self.running is None:
            return defer.succeed(None)
        d: defer.Deferred[None] = defer.Deferred()
        self.running.addBoth(_fire_with(d, with_result=False))
        return d

    # -- what the HTTP admin shows
    def in_force_gc(self) -> bool:
        return (self.running is not None and self._forced_now) or self.force_gc

    def next_compaction_ms(self, kind: str) -> int | None:
        """When the periodic passes will next run that kind (None: not periodically)."""
        p = self.policy
        enabled, last, interval = (
            (p.major_enabled, self.last_major_ms, p.major_interval_ms)
            if kind == MAJOR
            else (p.minor_enabled, self.last_minor_ms, p.minor_interval_ms)
        )
        if not enabled:
            return None
        due = last + interval
        # the first periodic pass after it is due runs it: passes come every gc_wait_ms, so
        # the whole waits between the next pass and ``due`` are skipped at once (stepped one
        # wait at a time, a 1 ms wait and a day's interval took 86.4 million steps a call)
        nxt = self.next_run_ms if self.next_run_ms is not None else due
        if nxt <= due:
            wait = max(p.gc_wait_ms, 1)
            nxt += ((due - nxt) // wait + 1) * wait
        return nxt

    def status(self) -> dict:
        """``GET /api/v1/bookie/gc``: Java's ``is_in_force_gc`` and bookied's figures (ms since the epoch)."""
        return {
            "is_in_force_gc": "true" if self.in_force_gc() else "false",
            "gcRunning": self.running is not None,
            "state": self.state,
            "compacting": self.compacting,
            "gcRuns": self.runs,
            "lastGcTime": self.last_run_ms,
            "lastGcDurationMs": self.last_run_duration_ms,
            "nextGcTime": self.next_run_ms,
            "majorCompactionCounter": self.major_count,
            "minorCompactionCounter": self.minor_count,
            "nearlyEmptyCompactionCounter": self.nearly_empty_count,
            "lastCompaction": self.last_compaction,
            "lastCompactionRun": self.last_compaction_run,
            "nextMajorCompactionTime": self.next_compaction_ms(MAJOR),
            "nextMinorCompactionTime": self.next_compaction_ms(MINOR),
            "ledgersRemoved": self.ledgers_removed,
            "reclaimedSpaceViaDeletes": self.reclaimed_by_deletion,
            "reclaimedSpaceViaCompaction": self.reclaimed_by_compaction,
            "logsDeleted": self.logs_deleted,
            "logsCompacted": self.logs_compacted,
            "entriesMoved": self.entries_moved,
            "bytesMoved": self.bytes_moved,
            "majorCompactionSuspended": self.suspend_major,
            "minorCompactionSuspended": self.suspend_minor,
            "damagedRecordCount": self.damaged_count,
            "damagedRecords": self.damaged,
            **self.policy.to_status(),
        }

    def details(self) -> list[dict]:
        """Java's ``gc_details`` body (one GarbageCollectionStatus: bookied has one GC thread;
        majorCompacting/minorCompacting only while compaction itself runs, as Java sets them),
        then bookied's: its state, the runs and each entry log's live ratio, whether it is
        being written (``active``) and, when it holds dead data, why it is still there
        (``keptBecause``)."""
        logs = []
        for store in self.stores:
            active = set(store.active_log_ids())
            for log_id, (size, live, entries, usage) in store.log_usage().items():
                doc = {
                    "ledgerDirectory": store.directory,
                    "logId": log_id,
                    "sizeBytes": size,
                    "liveBytes": live,
                    "liveEntries": entries,
                    "liveRatio": round(usage, 4),
                    "active": log_id in active,
                }
                why = self.not_reclaimed.get((store.directory, log_id))
                if why is not None:
                    doc["notReclaimed"] = why
                if usage < 1.0:
                    unchanged = self.settled.unchanged_ms(store.directory, log_id, self.clock.seconds())
                    doc["keptBecause"] = why or self.kept_because(
                        usage, log_id in active, store.log_size_limit, entries, size, unchanged
                    )
                logs.append(doc)
        return [
            {
                "forceCompacting": self.running is not None and self._forced_now and self.compacting is not None,
                "majorCompacting": self.compacting == MAJOR,
                "minorCompacting": self.compacting == MINOR,
                "lastMajorCompactionTime": self.last_major_ms,
                "lastMinorCompactionTime": self.last_minor_ms,
                "majorCompactionCounter": self.major_count,
                "minorCompactionCounter": self.minor_count,
                "nearlyEmptyCompactionCounter": self.nearly_empty_count,
                "state": self.state,
                "gcRunning": self.running is not None,
                "gcRuns": self.runs,
                "ledgersRemoved": self.ledgers_removed,
                "logsDeleted": self.logs_deleted,
                "logsCompacted": self.logs_compacted,
                "entryLogs": logs,
            }
        ]

    def kept_because(
        self,
        usage: float,
        active: bool,
        log_size_limit: int,
        entries: int = 1,
        size: int | None = None,
        unchanged_ms: float = 0.0,
    ) -> str:
        """Why an entry log with dead data in it is still there (``unchanged_ms``: how long its
        live bytes have stayed what they are)."""
        p = self.policy
        if active:
            return (
                f"being written: the entry log in use is compacted only after it rolls at logSizeLimit "
                f"({log_size_limit} bytes), so a quiet bookie keeps up to that much dead data in it"
            )
        if entries == 0:
            return "no live entry left: the next garbage collection pass deletes it whole"
        big = size is None or size >= nearly_empty_size(log_size_limit)
        if usage < p.nearly_empty_below and big and not self.suspend_minor:
            return (
                f"nearly empty (below nearlyEmptyCompactionThreshold {p.nearly_empty_below:g}): the next "
                "garbage collection pass takes it"
            )
        if big and not self.suspend_minor and p.takes_at_every_pass(usage, unchanged_ms):
            return (
                f"settled (below settledCompactionThreshold {p.settled_below:g}, live bytes unchanged for "
                f"{unchanged_ms / 1000:.0f} s): the next garbage collection pass takes it"
            )
        kind = MINOR if usage < p.minor_threshold else MAJOR if usage < p.major_threshold else None
        if kind is None:
            return (
                f"live ratio {usage:.2f} is not below majorCompactionThreshold {p.major_threshold:g} "
                f"(nor minorCompactionThreshold {p.minor_threshold:g})"
            )
        enabled = p.minor_enabled or p.major_enabled if kind == MINOR else p.major_enabled
        suspended = self.suspend_major and (kind == MAJOR or self.suspend_minor)
        if suspended:
            return f"below {kind}CompactionThreshold, but compaction is suspended: the disk is nearly full"
        if enabled:
            return f"below {kind}CompactionThreshold: the next {kind} compaction takes it"
        forceable = p.force_minor_allowed if kind == MINOR else p.force_major_allowed
        return (
            f"below {kind}CompactionThreshold, but {kind} compaction is not periodic "
            f"({kind}CompactionInterval=0)" + ("; a forced pass takes it" if forceable else "")
        )

    def register_metrics(self, metrics) -> None:
        """Java's GarbageCollectorStats names, lower-cased with underscores, under ``bookie_gc_``."""

        def live_bytes() -> int:
            return sum(u.live_bytes for s in self.stores for u in s.log_usage().values())

        metrics.counter("bookie_gc_major_compaction_total", "Major compactions run.", lambda: self.major_count)
        metrics.counter("bookie_gc_minor_compaction_total", "Minor compactions run.", lambda: self.minor_count)
        metrics.counter(
            "bookie_gc_nearly_empty_compaction_total",
            "Compactions of the nearly empty entry logs only, at passes without a major or minor one (bookied's).",
            lambda: self.nearly_empty_count,
        )
        metrics.counter(
            "bookie_gc_reclaimed_space_via_compaction",
            "Bytes of entry logs deleted by compaction.",
            lambda: self.reclaimed_by_compaction,
        )
        metrics.counter(
            "bookie_gc_reclaimed_space_via_deletes",
            "Bytes of entry logs deleted whole: no live entry left in them (their ledgers deleted).",
            lambda: self.reclaimed_by_deletion,
        )
        metrics.counter(
            "bookie_gc_deleted_entry_log_total",
            "Entry logs deleted whole, no live entry left in them (bookied's).",
            lambda: self.logs_deleted,
        )
        metrics.counter(
            "bookie_gc_compacted_entry_log_total",
            "Entry logs deleted by compaction after their live entries were moved (bookied's).",
            lambda: self.logs_compacted,
        )
        metrics.counter(
            "bookie_gc_deleted_ledger_count",
            "Deleted ledgers removed from the entry stores.",
            lambda: self.ledgers_removed,
        )
        metrics.counter(
            "bookie_gc_compacted_entries_total", "Entries moved by compaction (bookied's).", lambda: self.entries_moved
        )
        metrics.counter(
            "bookie_gc_compacted_bytes_total",
            "Bytes of entries moved by compaction (bookied's).",
            lambda: self.bytes_moved,
        )
        metrics.counter(
            "bookie_gc_damaged_record_total",
            "Damaged entry log records found by compaction (each reported once at WARN).",
            lambda: self.damaged_count,
        )
        for state in STATES:
            metrics.gauge(
                f"bookie_gc_{state.replace(' ', '_')}",
                f"1 while garbage collection is {state}.",
                lambda state=state: int(self.state == state),
            )
        metrics.gauge(
            "bookie_gc_active_entry_log_total",
            "Entry logs holding live entries.",
            lambda: sum(len(s.log_usage()) for s in self.stores),
        )
        metrics.gauge("bookie_gc_active_entry_log_space_bytes", "Live bytes in the entry logs.", live_bytes)
