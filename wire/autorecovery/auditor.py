"""The auditor (Java's ``Auditor``): finds ledgers with missing replicas and
marks them under-replicated for the replication workers.

* **Lost bookies.**  It watches ``available/`` and ``available/readonly/``.
  A bookie that ledger metadata names but that is registered in neither is
  *lost*; once it has been lost for ``B/lostBookieRecoveryDelay`` seconds
  (read live from ZooKeeper; 0, or more than one bookie lost at once, means at
  once) every ledger naming it is marked (``urL`` node, replicas merged by
  compare-and-set).  A bookie that comes back in time is never marked.  Any
  write to the delay node reschedules the pending audit; writing the value it
  already has, or 0, audits at once (that is what ``triggeraudit`` does).  The
  delay also applies to bookies an auditor finds lost when it takes over.
* **Periodic checks**: the same bookie audit every
  ``auditorPeriodicBookieCheckInterval`` seconds; every ledger's fragments
  (:mod:`.checker`: the first and last entry each bookie should hold, but those
  recorded lost: :mod:`.lostentries`) every
  ``auditorPeriodicCheckInterval`` seconds, marking what is missing; and the
  replicas check every ``auditorReplicasCheckInterval`` seconds (every entry's
  copies counted against Qw and Qa; reported, not marked, as Java does).
  ``B/checkallledgersctime`` and ``B/replicascheckctime`` record the last runs,
  so a new auditor does not repeat a check that ran recently.  0 turns a check
  off.  The placement check (``auditorPeriodicPlacementPolicyCheckInterval``,
  off by default as in Java) counts the ledgers whose ensembles break the
  client's placement policy -- what ``bkctl ledger list --not-adhering``
  lists -- and logs them (``B/placementpolicycheckctime``); it marks nothing.
* Every audit and check reads the ledgers in one streaming walk, :data:`WALK_CHUNK`
  at a time (:meth:`Auditor._each_ledger`): an audit keeps the ids of the ledgers
  naming each unregistered bookie and of those the full check found short, never
  every ledger's metadata (memory stays small at 10^6 ledgers).
* While ``B/disable`` exists nothing is marked; removing it runs the audit
  that was held back.
* A lost bookie's cookie deleted (``decommission``, once no ledger names it)
  has it audit again: the bookie is no longer lost.  Java's auditor learns
  it at its next audit.
"""

from __future__ import annotations

import itertools
import logging
import time
from array import array
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.clock import DelayedCall, ThreadedClock
from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata import underreplication as UR
from bkctl.wire.metadata.store import StoredValue, registered_bookies

from .checker import bookies_missing_replicas
from .lostentries import read_records
from .status import AuditedBookie, AuditorStatus

if TYPE_CHECKING:
    from bkctl.wire.client.bookkeeper import BookKeeperClient
    from bkctl.wire.metadata.ledger import LedgerMetadata

    from .config import AutoRecoveryConfig, AutoRecoveryStats

log = logging.getLogger(__name__)

__all__ = ["Auditor"]

#: ledgers a walk of the auditor's reads at a time (:meth:`Auditor._each_ledger`)
WALK_CHUNK = 1000
#: ledgers the placement check logs one line each for (the rest are counted)
PLACEMENT_LOGGED = 100


T = TypeVar("T")


def _take(it: Iterator[T], n: int) -> list[T]:
    return list(itertools.islice(it, n))


class Auditor:
    """Runs while this daemon is the elected auditor (:meth:`start` .. :meth:`stop`).

    ``client`` is a :class:`~bkctl.wire.client.bookkeeper.BookKeeperClient`
    whose ``store`` is the daemon's :class:`~bkctl.wire.metadata.store.MetadataStore`;
    ``config`` an :class:`~bkctl.wire.autorecovery.config.AutoRecoveryConfig`.
    """

    def __init__(
        self,
        client: BookKeeperClient,
        config: AutoRecoveryConfig,
        reactor: ThreadedClock,
        stats: AutoRecoveryStats | None = None,
        clock: Callable[[], float] = time.time,
        auditor_id: str | None = None,
    ):
        #: the daemon's id, in the status node operators read (:mod:`.status`)
        self.auditor_id = auditor_id
        self.client = client
        self.store = client.store
        self.config = config
        self.reactor = reactor
        self.stats = stats
        self.clock = clock
        self.running = False
        #: bookie id -> when this auditor first saw it lost (clock seconds)
        self.lost_since: dict[str, float] = {}
        self.delay: int = int(config.lost_bookie_recovery_delay)
        self._delay_version: int | None = None
        self._disabled = False
        #: ledgers that needed marking while autorecovery was disabled (0: none)
        self._held_back = 0
        #: lost bookie -> when it is due (clock seconds), None when marked already
        self._lost_due: dict[str, float | None] = {}
        #: lost bookie -> why it was not waited for (several lost at once, a triggered audit)
        self._at_once: dict[str, str] = {}
        #: lost bookie whose ledgers were marked -> why the delay was not waited for (None: it was);
        #: such a bookie stays due (no countdown again) for as long as it is lost
        self._marked: dict[str, str | None] = {}
        #: lost bookie -> how many ledgers named it at the last audit
        self._named_by: dict[str, int] = {}
        #: the bookies with a cookie, as the cookie watch last told (None: not told yet)
        self._cookies: set[str] | None = None
        self._timers: dict[str, DelayedCall] = {}
        #: what stops each of the store's watches (set by :meth:`_watch`)
        self._unwatch: list[Callable[[], None]] = []
        self._auditing = False
        self._audit_again: bool | None = None
        self._check_again = False
        #: Deferred of the audit in progress (tests and stop() wait for it)
        self.current: defer.Deferred[None] | None = None

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> defer.Deferred[None]:
        self.running = True
        return self.client.run_blocking(self._prepare).addCallback(lambda _: self._schedule_checks())

    def _prepare(self) -> None:
        """Make the tree, set the delay if nobody has, and watch (blocking: the store's calls)."""
        ur = self.store.underreplication
        ur.ensure_layout()
        if ur.lost_bookie_recovery_delay() is None:
            ur.set_lost_bookie_recovery_delay(int(self.config.lost_bookie_recovery_delay))
        self._watch()

    def _watch(self) -> None:
        """Audit when a bookie registers or goes, follow the delay and the switch; each
        watch tells at once, then from the store's thread: the reactor takes it from there."""
        hop = self.reactor.callFromThread

        def registrations(_bookies: list[str]) -> None:
            if self.running:
                hop(self.request_audit)

        def delay_changed(node: StoredValue | None) -> None:
            if self.running and node is not None:
                hop(self._delay_written, node.value, node.version)

        def switch_changed(enabled: bool) -> None:
            if self.running:
                hop(self._disable_changed, not enabled)

        def cookies_changed(bookies: list[str]) -> None:
            if self.running:
                hop(self._cookies_changed, set(bookies))

        registration, ur = self.store.registration, self.store.underreplication
        for unwatch in (
            registration.watch_writable_bookies(registrations),
            registration.watch_readonly_bookies(registrations),
            registration.watch_all_bookies(cookies_changed),
            ur.watch_lost_bookie_recovery_delay(delay_changed),
            ur.watch_enabled(switch_changed),
        ):
            self._unwatch.append(unwatch)
            if not self.running:  # stopped meanwhile: stop() has been through the list
                unwatch()

    def _schedule_checks(self) -> None:
        self._schedule("bookie-check", self.config.auditor_periodic_bookie_check_interval, self._periodic_bookie_check)
        for name, interval, node, fn in self._timed_checks():
            if interval and interval > 0:
                self.client.run_blocking(self._read_last_run, node).addCallback(
                    self._schedule_check, name, interval, fn
                )

    def _schedule_check(self, last_run_ms: int | None, name: str, interval: float, fn: Callable[[], None]) -> None:
        self._schedule(name, self._initial_delay(interval, last_run_ms), fn)

    def _timed_checks(self) -> tuple[tuple[str, float, str, Callable[[], None]], ...]:
        return (
            (
                "ledger-check",
                self.config.auditor_periodic_check_interval,
                P.UR_CHECK_ALL_LEDGERS_CTIME,
                self._periodic_ledger_check,
            ),
            (
                "replicas-check",
                self.config.auditor_replicas_check_interval,
                P.UR_REPLICAS_CHECK_CTIME,
                self._periodic_replicas_check,
            ),
            (
                "placement-check",
                self.config.auditor_placement_policy_check_interval,
                P.UR_PLACEMENT_POLICY_CHECK_CTIME,
                self._periodic_placement_check,
            ),
        )

    def _initial_delay(self, interval: float, last_run_ms: int | None) -> float:
        """As Java: at once when the check never ran, else when ``interval`` has
        passed since it last ran (whichever auditor ran it)."""
        if last_run_ms is None:
            return 0.001
        return max(0.001, interval - (self.clock() - last_run_ms / 1000.0))

    def _read_last_run(self, check: str) -> int | None:
        try:
            ctime: int | None = self.store.underreplication.check_ctime(check)
            return ctime
        except Exception:  # noqa: BLE001 - unreadable: as if it never ran
            return None

    def stop(self) -> defer.Deferred[None]:
        """Step down: no more marking; waits for an audit in progress to end."""
        self.running = False
        for unwatch in self._unwatch:
            unwatch()
        for call in self._timers.values():
            if call.active():
                call.cancel()
        self._timers.clear()
        return self.current if self.current is not None else defer.succeed(None)

    def _schedule(self, name: str, seconds: float, fn: Callable[[], None]) -> None:
        old = self._timers.pop(name, None)
        if old is not None and old.active():
            old.cancel()
        if self.running and seconds and seconds > 0:
            self._timers[name] = self.reactor.callLater(seconds, fn)

    def _periodic_bookie_check(self) -> None:
        self.request_audit()
        self._schedule("bookie-check", self.config.auditor_periodic_bookie_check_interval, self._periodic_bookie_check)

    def _periodic_ledger_check(self) -> None:
        self.request_audit(check_ledgers=True)
        self._schedule("ledger-check", self.config.auditor_periodic_check_interval, self._periodic_ledger_check)

    def _periodic_replicas_check(self) -> None:
        self._schedule("replicas-check", self.config.auditor_replicas_check_interval, self._periodic_replicas_check)
        d = defer.ensureDeferred(self.replicas_check())
        d.addErrback(lambda f: log.error("auditor: replicas check failed: %s", f.getErrorMessage()))

    async def replicas_check(self) -> dict[str, int]:
        """Count, over every closed ledger, entries stored on fewer bookies than
        their write and ack quorums, and on none (Java's replicas check reports
        these; it marks nothing).  Records ``B/replicascheckctime``."""
        from bkctl.wire.fsck.check import BookieRequests

        from .checker import replica_counts

        totals = {
            "ledgers": 0,
            "entries": 0,
            "below_write_quorum": 0,
            "below_ack_quorum": 0,
            "no_replica": 0,
            "ledgers_below_write_quorum": 0,
            "ledgers_below_ack_quorum": 0,
            "ledgers_without_replica": 0,
        }
        requests = BookieRequests(self.client.pool)  # a bookie without entry lists is asked once
        async for ledger_id, md in self._each_ledger():
            if not self.running:
                return totals
            counts = await replica_counts(self.client, ledger_id, md, requests)
            totals["ledgers"] += 1
            for key in ("entries", "below_write_quorum", "below_ack_quorum", "no_replica"):
                totals[key] += counts[key]
            if counts["below_write_quorum"]:
                totals["ledgers_below_write_quorum"] += 1
            if counts["below_ack_quorum"]:
                totals["ledgers_below_ack_quorum"] += 1
                log.warning(
                    "auditor: ledger %d has %d entries on fewer than Qa=%d bookies",
                    ledger_id,
                    counts["below_ack_quorum"],
                    md.ack_quorum,
                )
            if counts["no_replica"]:
                totals["ledgers_without_replica"] += 1
                log.error("auditor: ledger %d has %d entries with no replica at all", ledger_id, counts["no_replica"])
        await self.client.run_blocking(self._record_run, P.UR_REPLICAS_CHECK_CTIME)
        if self.stats is not None:
            self.stats.last_replicas_check = totals
        log.info("auditor: replicas check: %s", totals)
        return totals

    def _periodic_placement_check(self) -> None:
        self._schedule(
            "placement-check", self.config.auditor_placement_policy_check_interval, self._periodic_placement_check
        )
        d = defer.ensureDeferred(self.placement_check())
        d.addErrback(lambda f: log.error("auditor: placement check failed: %s", f.getErrorMessage()))

    async def placement_check(self) -> dict[str, Any]:
        """Ledgers whose segments' ensembles break the placement policy (Java's
        placement policy check; reported, not marked).  Records
        ``B/placementpolicycheckctime``."""
        from bkctl.wire.client.placement import segments_not_adhering

        registered, _disabled = await self.client.run_blocking(self._registered_and_switch)
        placement = self.client.placement
        await self.client.run_blocking(placement.refresh, sorted(registered))
        failing: list[int] = []
        checked = 0
        async for ledger_id, md in self._each_ledger():
            checked += 1
            firsts = segments_not_adhering(md, placement)
            if firsts:
                failing.append(ledger_id)
                if len(failing) <= PLACEMENT_LOGGED:
                    log.warning(
                        "auditor: ledger %d does not adhere to the %s placement policy (segments from entries %s)",
                        ledger_id,
                        getattr(placement, "name", "?"),
                        ", ".join(map(str, firsts)),
                    )
        totals = {"ledgers": checked, "not_adhering": len(failing), "ledger_ids": failing}
        await self.client.run_blocking(self._record_run, P.UR_PLACEMENT_POLICY_CHECK_CTIME)
        if self.stats is not None:
            self.stats.last_placement_check = totals
        log.info(
            "auditor: placement check: %d of %d ledgers do not adhere%s",
            len(failing),
            checked,
            f" (the first {PLACEMENT_LOGGED} logged one by one)" if len(failing) > PLACEMENT_LOGGED else "",
        )
        return totals

    # -- events -------------------------------------------------------------------------
    def _delay_written(self, data: bytes, version: int) -> None:
        try:
            delay = UR.parse_lost_bookie_recovery_delay(data)
        except Exception as exc:  # noqa: BLE001
            log.error("auditor: ignoring corrupt lostBookieRecoveryDelay %r: %s", data, exc)
            return
        first = self._delay_version is None
        rewritten = not first and version != self._delay_version
        self._delay_version = version
        same = delay == self.delay
        self.delay = delay
        if first:
            self.request_audit()
        elif rewritten and (same or delay == 0):
            log.info("auditor: lostBookieRecoveryDelay rewritten (%ds): auditing now", delay)
            self.request_audit(force=True)
        elif rewritten:
            log.info("auditor: lostBookieRecoveryDelay is now %ds: rescheduling the audit", delay)
            self.request_audit()

    def _cookies_changed(self, cookies: set[str]) -> None:
        """A lost bookie's cookie deleted (a decommission, once no ledger names it): audit
        again, so that the bookie leaves the lost ones now rather than at the next
        registration change or periodic check."""
        gone = set(self.lost_since) - cookies
        if self._cookies is not None and gone & self._cookies:
            log.info("auditor: the cookie of lost bookie %s was deleted: auditing again", ", ".join(sorted(gone)))
            self.request_audit()
        self._cookies = cookies

    def _disable_changed(self, disabled: bool) -> None:
        was, self._disabled = self._disabled, disabled
        if was and not disabled:
            log.info("auditor: autorecovery enabled again")
            if self._held_back:
                self.request_audit()
        elif disabled and not was:
            log.info("auditor: autorecovery disabled (B/disable exists): nothing will be marked")
        if was != disabled:
            self._publish()

    # -- the audit ---------------------------------------------------------------------------
    def request_audit(self, force: bool = False, check_ledgers: bool = False) -> defer.Deferred[None]:
        """Audit now (one at a time: a request during an audit runs right after it).
        ``force`` marks every lost bookie regardless of the delay; ``check_ledgers``
        also checks every ledger's replicas."""
        if not self.running:
            return defer.succeed(None)
        if self._auditing:
            self._audit_again = bool(self._audit_again) or force
            self._check_again = self._check_again or check_ledgers
            return self.current if self.current is not None else defer.succeed(None)
        self._auditing = True
        current = self.current = defer.ensureDeferred(self._audit(force, check_ledgers))

        def done(result: None) -> None:
            self._auditing = False
            again, self._audit_again = self._audit_again, None
            check, self._check_again = self._check_again, False
            if again is not None or check:
                self.request_audit(force=bool(again), check_ledgers=check)
            return result

        def failed(failure: Failure) -> None:
            log.error(
                "auditor: audit failed: %s; next try in %gs",
                failure.getErrorMessage(),
                self.config.audit_retry_interval,
            )
            self._schedule("retry", self.config.audit_retry_interval, self._audit_later)

        current.addErrback(failed).addBoth(done)
        return current

    def _audit_later(self) -> None:
        """A timer's audit (its Deferred is :attr:`current`)."""
        self.request_audit()

    async def _audit(self, force: bool, check_ledgers: bool) -> None:
        run = self.client.run_blocking
        registered, disabled = await run(self._registered_and_switch)
        self._disabled = disabled
        # one streaming walk: what is kept is the ids of the ledgers naming each unregistered
        # bookie (to be marked once it is due) and the ledgers the full check found short of
        # a replica -- never every ledger's metadata
        named: dict[str, array[int]] = {}
        checked: dict[int, set[str]] = {}
        # entries recorded lost (no good copy anywhere) are not probed: marking a bookie for
        # them would have the ledger moved at every audit (:mod:`.lostentries`)
        lost_entries = await run(read_records, self.store) if check_ledgers else {}
        walked = 0
        started = time.monotonic()
        async for ledger_id, md in self._each_ledger():
            walked += 1
            for bookie in md.bookies:
                if bookie not in registered:
                    named.setdefault(bookie, array("q")).append(ledger_id)
            if check_ledgers:
                if not self.running:
                    return
                record = lost_entries.get(ledger_id)
                missing = await bookies_missing_replicas(
                    self.client, ledger_id, md, registered, record.entry_ids() if record is not None else ()
                )
                if missing:
                    checked[ledger_id] = missing
        if not self.running:
            return
        if check_ledgers:
            log.info(
                "auditor: checked every ledger's replicas: %d ledgers in %.1f s, %d short of one",
                walked,
                time.monotonic() - started,
                len(checked),
            )
        now = self.clock()
        lost = set(named)
        for bookie in list(self.lost_since):
            if bookie not in lost:
                log.info("auditor: bookie %s is back (or no ledger names it)", bookie)
                del self.lost_since[bookie]
                self._marked.pop(bookie, None)
        for bookie in lost - set(self.lost_since):
            log.warning("auditor: bookie %s is lost (named by ledgers, not registered)", bookie)
            self.lost_since[bookie] = now
        if force or self.delay <= 0 or len(lost) > 1:
            due = set(lost)
            if len(lost) > 1 and self.delay > 0 and not force:
                why = f"{len(lost)} bookies lost at once: not waiting lostBookieRecoveryDelay ({self.delay}s)"
                log.info("auditor: %s (as Java's auditor)", why)
            else:
                why = "audit triggered" if force else "lostBookieRecoveryDelay is 0"
            at_once = {b: why for b in lost}
        else:
            due = {b for b in lost if now - self.lost_since[b] >= self.delay}
            at_once = {}
        marked_before = lost.intersection(self._marked)
        due |= marked_before
        earlier = {b: self._marked[b] for b in marked_before if self._marked[b]}  # the first reason stays
        self._at_once = {**at_once, **{b: why for b, why in earlier.items() if why is not None}}
        self._named_by = {b: len(named[b]) for b in lost}
        waiting = lost - due
        if waiting:
            wake = min(self.lost_since[b] for b in waiting) + self.delay - now
            self._schedule("lost-bookie-delay", max(0.0, wake), self._audit_later)
        else:
            self._schedule("lost-bookie-delay", 0, lambda: None)
        marks: dict[int, set[str]] = defaultdict(set)
        for bookie in due:
            for ledger_id in named[bookie]:
                marks[ledger_id].add(bookie)
        for ledger_id, missing in checked.items():
            missing -= waiting
            if missing:
                marks[ledger_id] |= missing
        self._lost_due = {b: (None if b in due else self.lost_since[b] + self.delay) for b in lost}
        if marks and self._disabled:
            self._held_back = len(marks)
            log.info("auditor: %d ledgers need re-replication, held back while autorecovery is disabled", len(marks))
            self._publish()
            return
        self._held_back = 0
        self._publish()
        for bookie in due:
            self._marked.setdefault(bookie, self._at_once.get(bookie))
        if marks:
            await run(self._mark, dict(marks))
            log.info(
                "auditor: marked %d ledgers under-replicated (lost: %s)", len(marks), ", ".join(sorted(due)) or "-"
            )
        if check_ledgers:
            await run(self._record_run, P.UR_CHECK_ALL_LEDGERS_CTIME)
        if self.stats is not None:
            self.stats.audited(len(marks))

    def status(self) -> AuditorStatus:
        """What this auditor waits for, as ``bkctl autorecovery status`` shows it
        (times in ms since the epoch, by this host's clock)."""
        lost = []
        for bookie, since in sorted(self.lost_since.items()):
            due = self._lost_due.get(bookie)
            lost.append(
                AuditedBookie(
                    bookie_id=bookie,
                    lost_since=int(since * 1000),
                    due=None if due is None else int(due * 1000),
                    not_waited=self._at_once.get(bookie),
                    named_by=self._named_by.get(bookie),
                )
            )
        return AuditorStatus(
            auditor=self.auditor_id,
            updated=int(self.clock() * 1000),
            delay=self.delay,
            disabled=self._disabled,
            held_back=self._held_back,
            lost=tuple(lost),
        )

    def _publish(self) -> None:
        from . import status

        if not self.running:
            return
        self.client.run_blocking(status.publish, self.store, status.AUDITOR, self.status()).addErrback(
            lambda f: log.info("auditor: could not publish its status: %s", f.getErrorMessage())
        )

    def _registered_and_switch(self) -> tuple[set[str], bool]:
        """The registered bookies and whether autorecovery is disabled (blocking)."""
        store = self.store
        return registered_bookies(store.registration), not store.underreplication.is_enabled()

    async def _each_ledger(self) -> AsyncIterator[tuple[int, LedgerMetadata]]:
        """Every ledger's ``(ledger_id, metadata)``, ascending, from one streaming walk
        read :data:`WALK_CHUNK` ledgers at a time off the reactor (an async iterator):
        memory holds one chunk, however many ledgers there are, and the reactor checks
        a chunk while nothing else is read.  A ledger deleted meanwhile is left out, one
        whose metadata does not decode logged and left out (one bad znode does not stop
        every check)."""
        run = self.client.run_blocking
        walk = self.store.ledgers.walk()
        try:
            while True:
                chunk = await run(_take, walk, WALK_CHUNK)
                if not chunk:
                    return
                for ledger_id, md, _version in chunk:
                    if md is None:
                        continue
                    if isinstance(md, Exception):
                        log.error("auditor: ledger %d left out: %s", ledger_id, md)
                        continue
                    yield ledger_id, md
        finally:
            close = getattr(walk, "close", None)  # its connection goes back to the session
            if close is not None:
                close()

    def _mark(self, marks: dict[int, set[str]]) -> None:
        for ledger_id, bookies in sorted(marks.items()):
            if not self.running:
                return
            self.store.underreplication.mark(ledger_id, sorted(bookies))
            if self.stats is not None:
                self.stats.ledgers_marked += 1

    def _record_run(self, check: str) -> None:
        """Write when a periodic check last ran (``checkallledgersctime`` and friends)."""
        self.store.underreplication.set_check_ctime(check, int(self.clock() * 1000))
