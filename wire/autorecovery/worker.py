"""A replication worker (Java's ``ReplicationWorker``): takes under-replicated
ledgers one at a time and re-replicates them.

For each ledger: take its lock ``B/locks/urL<id>`` (EPHEMERAL, so it goes with
this worker's session), read the marker's version, find which bookies lack
replicas now (:mod:`.checker`: a bookie that came back is left alone), copy
their fragments to other bookies with the same code ``bkctl recover`` uses
(:func:`~bkctl.wire.client.rereplication.rereplicate_ledger`: entries first,
then the metadata by compare-and-set), check again, and only then delete the
marker with the version read (a marker re-marked meanwhile stays) and the lock.

* The bookies a mark names that the first-and-last check finds whole (a mark
  ``bkctl ledger fsck --fix mark`` wrote for entries missing in the middle, or a
  corrupt copy) are looked at in full: their entry lists, then every entry they
  should hold read and its digest checked (:func:`.checker.marked_copies_lacking`).
  Java's worker trusts only its own check and would unmark such a ledger unrepaired.
* A bookie found lacking copies that is in fact up and writable (killed while
  entries were on their way to it, back since) keeps its place and gets its
  copies written back when no bookie outside the ensemble is free to take
  the fragment (``rereplicate_ledger(refill=...)``); Java's worker fails to
  find a replacement and leaves the ledger marked until a bookie is added.
* An open ledger whose last segment lost a bookie is not fenced at once: its
  writer may still replace the bookie itself.  The lock is kept for
  ``openLedgerRereplicationGracePeriod``; then the ledger is recovered (fenced
  and closed) and re-replicated.  A bookie registering meanwhile has it looked
  at again at once: its lost bookie back, nothing is fenced.
* A ledger that fails keeps its lock for ``lockReleaseOfFailedLedgerGracePeriod``
  (doubling on each failure of that ledger, up to 8 times the grace period),
  so no worker retries it at once; then the lock is released.  It is released
  sooner when a bookie registers that was not registered at the failure (a
  lost bookie back, a new one): what the attempt lacked may be there now.
  Java's worker always waits out the grace period.
* An entry every replica answers for without a good copy (none holds it, or each
  copy fails its digest) is lost: the fragment's other entries are copied and the
  swap made all the same, and the lost ones are recorded (:mod:`.lostentries`:
  ``autorecovery status`` names them) and left out of this worker's and the
  auditor's checks, so the ledger is neither failed for ever nor marked again for
  them.  Java's worker fails the whole ledger, and retries it for ever.
* Nothing is taken while ``B/disable`` exists.
* The lock holds this worker's id (its daemon's bookie id) in Java's
  ``LockDataFormat.bookieId``; Java's worker writes its host name there.
* Its status node (:mod:`.status`) says what it does with each ledger it
  holds (re-replicating since when, waiting for an open ledger's writer
  until when, held after a failure until when), every recent failed attempt
  with its reason, and the ledgers it finished lately: what
  :mod:`.repairstate` reads.
* ``rereplicationEntryBatchSize`` entries are added at a time (as many more read ahead) and
  ``replicationRateByBytes`` (bytes/s, <= 0 unlimited) bounds the copy rate.
* The adds leave in batches, on a 10 ms grid of the worker's own
  (:class:`RateLimiter` ``batched``): what a tick let go reaches the new bookie
  together, is journaled with one fsync and served in one reactor turn, where
  adds sent one by one, as reads came back, cost the bookies a turn and a
  journal fsync each few entries.  The bookies spend about a third less CPU
  per entry copied, and a live writer's adds have less of the bookies' time
  and fewer fsyncs to wait behind; a worker copies at most
  ``rereplicationEntryBatchSize`` entries a tick.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from twisted.internet import defer

from bkctl.wire.client.cork import Cork
from bkctl.wire.client.throttle import RateLimiter
from bkctl.wire.clock import Clock, DelayedCall
from bkctl.wire.metadata.store import registered_bookies

from .checker import bookies_missing_replicas, marked_copies_lacking
from .lostentries import lost_entry_ids, record_lost
from .status import FailedAttempt, FinishedRepair, Hold, WorkerFailure, WorkerStatus

if TYPE_CHECKING:
    from bkctl.wire.client.bookkeeper import BookKeeperClient
    from bkctl.wire.client.rereplication import UnreadableEntry

    from .config import AutoRecoveryConfig, AutoRecoveryStats

log = logging.getLogger(__name__)

__all__ = ["RateLimiter", "ReplicationWorker"]


class ReplicationWorker:
    """Re-replicates marked ledgers until :meth:`stop`.  ``cork``: the
    client's (its pool's :class:`~bkctl.wire.client.cork.Cork`), so that what
    a tick of its throttle lets go leaves once per connection."""

    #: failed attempts kept per ledger, and ledgers with attempts kept, in the status node
    ATTEMPTS_PER_LEDGER = 5
    LEDGERS_WITH_ATTEMPTS = 100
    #: ledgers finished lately, kept in the status node
    DONE_KEPT = 20
    #: characters of a failure's reason kept in the status node
    REASON_CHARS = 400

    def __init__(
        self,
        client: BookKeeperClient,
        config: AutoRecoveryConfig,
        reactor: Clock,
        stats: AutoRecoveryStats | None = None,
        hostname: str | None = None,
        worker_id: str | None = None,
        cork: Cork | None = None,
    ):
        #: the daemon's id (its bookie id): in its status node (:mod:`.status`) and its locks
        self.worker_id = worker_id
        #: the last re-replication that failed
        self.last_failure: WorkerFailure | None = None
        self.client = client
        self.store = client.store
        self.config = config
        self.reactor = reactor
        self.stats = stats
        self.hostname = hostname or socket.gethostname()
        self.throttle = RateLimiter(config.replication_rate_by_bytes, reactor, batched=True, cork=cork)
        self.running = False
        #: ledgers whose lock this worker keeps for a while (grace periods): their timers
        self.held: dict[int, DelayedCall] = {}
        #: why each held ledger is held: "grace" or "failed", since and until when
        self.holds: dict[int, Hold] = {}
        #: ledger id -> its failed attempts here, oldest first
        self.attempts: dict[int, list[FailedAttempt]] = {}
        #: the ledgers finished lately, oldest first
        self.done: list[FinishedRepair] = []
        #: held ledger -> the bookies registered when it was held, and its mark's version
        self._registered_at_hold: dict[int, set[str]] = {}
        self._held_version: dict[int, int] = {}
        #: open ledger in its grace period -> when the grace period ends (reactor seconds)
        self._grace_until: dict[int, float] = {}
        self._failures: dict[int, int] = {}
        self._grace_over: set[int] = set()
        self._nap: defer.Deferred[None] | None = None
        self._loop: defer.Deferred[None] | None = None
        #: a status write is under way / another was asked for meanwhile (see _publish)
        self._publishing = False
        self._publish_again = False
        #: the ledger the loop re-replicates now, if any
        self.current: int | None = None
        #: every ledger being re-replicated now (the loop's, open ones fenced after their
        #: grace period) -> since when (ms)
        self.active: dict[int, int] = {}
        #: ledger being re-replicated -> the bookies its mark names (looked at in full: :func:`.checker.marked_copies_lacking`)
        self._mark_replicas: dict[int, tuple[str, ...]] = {}
        #: ledger id -> its mark's ctime (ms), while this worker holds its lock
        self._marked_at: dict[int, int | None] = {}
        #: ledger being re-replicated -> how many entries this attempt found lost
        self._lost_now: dict[int, int] = {}

    @property
    def lock_holder(self) -> str:
        """What this worker writes into its locks: its bookie id (Java's worker: its host name)."""
        return self.worker_id or self.hostname

    def _now_ms(self) -> int:
        return int(self.reactor.seconds() * 1000)

    def status(self) -> WorkerStatus:
        """This worker as its status node keeps it (:mod:`.repairstate` reads it)."""
        return WorkerStatus(
            worker=self.lock_holder,
            host=self.hostname,
            current=self.current,
            active=dict(self.active),
            held=tuple(sorted(self.held)),
            holds=dict(self.holds),
            attempts={lid: tuple(a) for lid, a in self.attempts.items()},
            done=tuple(self.done),
            last_failure=self.last_failure,
            updated=self._now_ms(),
        )

    def _publish(self) -> None:
        """Write this worker's status node, one write at a time: writes handed to the
        thread pool side by side could land out of order and leave an older status
        there until the next change (an open ledger said "re-replicating" for minutes
        after it had gone on to wait for its writer).  A call during a write makes
        one more write, of the status as it is when that write ends."""
        from . import status

        if not self.running or self.worker_id is None:
            return
        if self._publishing:
            self._publish_again = True
            return
        self._publishing, self._publish_again = True, False

        def written(_: object) -> None:
            self._publishing = False
            if self._publish_again:
                self._publish()

        d = self.client.run_blocking(status.publish, self.store, f"{status.WORKERS}/{self.worker_id}", self.status())
        d.addErrback(lambda f: log.info("replication worker: could not publish its status: %s", f.getErrorMessage()))
        d.addBoth(written)

    def start(self) -> None:
        self.running = True
        self._publish()
        self._loop = defer.ensureDeferred(self._run())
        self._loop.addErrback(lambda f: log.error("replication worker stopped: %s", f.getTraceback()))

    def stop(self) -> defer.Deferred[None]:
        """Stop taking ledgers.  A copy in progress is not waited for: its lock
        goes with the session when the daemon closes it, the metadata changes
        only after a whole fragment is copied, and another worker starts over."""
        self.running = False
        for call in self.held.values():
            if call.active():
                call.cancel()
        self.held.clear()
        self.holds.clear()
        self.wake()
        if self._loop is None or self.current is not None:
            return defer.succeed(None)
        return self._loop

    def wake(self) -> None:
        """Look for work now instead of at the end of the current pause."""
        nap, self._nap = self._nap, None
        if nap is not None and not nap.called:
            nap.callback(None)

    def _sleep(self, seconds: float) -> defer.Deferred[None]:
        nap: defer.Deferred[None] = defer.Deferred()
        self._nap = nap
        call = self.reactor.callLater(seconds, self.wake)

        def stop_timer(_: object) -> None:
            if call.active():
                call.cancel()

        return nap.addBoth(stop_timer)

    # -- the loop ---------------------------------------------------------------------
    async def _run(self) -> None:
        run = self.client.run_blocking
        while self.running:
            try:
                if not await run(self.store.underreplication.is_enabled):
                    await self._sleep(self.config.worker_poll_interval)
                    continue
                if self._registered_at_hold:
                    self._release_on_new_bookies(await run(self._registered))
                taken = await run(self.store.underreplication.acquire, self.lock_holder, skip=tuple(self.held))
            except Exception as exc:  # noqa: BLE001 - ZooKeeper trouble: wait and look again
                log.warning("replication worker: %s", exc)
                await self._sleep(self.config.worker_poll_interval)
                continue
            if taken is None:
                await self._sleep(self.config.worker_poll_interval)
                continue
            mark, version = taken
            if not self.running:
                await run(self.store.underreplication.release, mark.ledger_id)
                break
            self.current = mark.ledger_id
            self._mark_replicas[mark.ledger_id] = mark.replicas
            self.active[mark.ledger_id] = self._now_ms()
            self._marked_at[mark.ledger_id] = mark.ctime
            self._publish()
            try:
                await self.rereplicate(mark.ledger_id, version)
            except Exception as exc:  # noqa: BLE001 - e.g. ZooKeeper away at the final unmark
                # the loop must go on: escaping, it stopped this worker for good with the
                # ledger's lock held for the rest of the session
                log.error("ledger %d: re-replication stopped unexpectedly", mark.ledger_id, exc_info=True)
                await self._failed(mark.ledger_id, f"{type(exc).__name__}: {exc}")
            finally:
                self.current = None
                self._mark_replicas.pop(mark.ledger_id, None)
                self.active.pop(mark.ledger_id, None)
                self._publish()
                if mark.ledger_id not in self.held:
                    self._marked_at.pop(mark.ledger_id, None)

    async def rereplicate(self, ledger_id: int, version: int) -> str:
        """Re-replicate one locked ledger; returns what happened: ``replicated``,
        ``deleted``, ``clean`` (nothing was missing), ``waiting`` (open ledger in
        its grace period), ``remarked`` (marked again meanwhile: lock released,
        marker kept) or ``failed``."""
        try:
            result = await self._rereplicate(ledger_id, version)
        finally:
            lost_now = self._lost_now.pop(ledger_id, 0)
        if result not in ("waiting", "failed"):
            self.attempts.pop(ledger_id, None)
            done = FinishedRepair(ledger_id, self._now_ms(), result, lost_now or None)
            self.done = (self.done + [done])[-self.DONE_KEPT :]
        return result

    async def _rereplicate(self, ledger_id: int, version: int) -> str:
        from bkctl.wire.client.rereplication import rereplicate_ledger
        from bkctl.wire.metadata.errors import NoSuchLedger

        run = self.client.run_blocking
        started = time.monotonic()
        try:
            md, _ = await run(self.store.ledgers.read, ledger_id)
        except NoSuchLedger:
            await run(self.store.underreplication.mark_replicated, ledger_id, version)
            await run(self.store.lost_entries.forget, ledger_id)
            return "deleted"
        except Exception as exc:  # noqa: BLE001
            return await self._failed(ledger_id, str(exc))
        registered = await run(self._registered)
        known_lost = await run(lost_entry_ids, self.store, ledger_id)
        lost = await bookies_missing_replicas(self.client, ledger_id, md, registered, known_lost)
        named = set(self._mark_replicas.get(ledger_id, ())).intersection(registered, md.bookies) - lost
        if named and md.is_closed:  # what the mark names and the quick check finds whole: looked at in full
            lost |= await marked_copies_lacking(self.client, ledger_id, md, named, lost_entries=known_lost)
        unreadable: list[UnreadableEntry] = []
        if lost:
            recover_open = ledger_id in self._grace_over or self.config.open_ledger_rereplication_grace_period <= 0
            if not md.is_closed and lost.intersection(md.last_ensemble) and not recover_open:
                now = self.reactor.seconds()
                until = self._grace_until.setdefault(
                    ledger_id, now + self.config.open_ledger_rereplication_grace_period
                )
                grace = max(0.001, until - now)
                log.info(
                    "ledger %d is open and its last ensemble lost %s: waiting %gs for its writer before fencing it",
                    ledger_id,
                    ", ".join(sorted(lost)),
                    grace,
                )
                self._hold(ledger_id, "grace", grace, self._grace_expired, ledger_id, version)
                self._registered_at_hold[ledger_id] = registered
                self._held_version[ledger_id] = version
                return "waiting"
            # a lost bookie that is up and writable only lacks copies (killed while they were on
            # their way): with no spare bookie they are written back to it
            writable = await run(self.store.registration.writable_bookies)
            result = await rereplicate_ledger(
                self.client,
                ledger_id,
                sorted(lost),
                window=self.config.rereplication_entry_batch_size,
                throttle=self.pace,
                refill=set(writable) & lost,
                on_unreadable=unreadable.append,
            )
            status = result.status
            if status == "deleted":
                await run(self.store.underreplication.mark_replicated, ledger_id, version)
                await run(self.store.lost_entries.forget, ledger_id)
                return "deleted"
            if unreadable:  # the entries no replica has a good copy of: recorded, never tried for ever
                record = await run(record_lost, self.store, ledger_id, unreadable, self.lock_holder, self._now_ms())
                known_lost |= record.entry_ids()
                self._lost_now[ledger_id] = len(unreadable)
                log.error(
                    "ledger %d: %d entries have no good copy on any replica (lost; the others are copied): %s",
                    ledger_id,
                    len(unreadable),
                    "; ".join(r.text() for r in record.runs[:3]),
                )
            if status not in ("recovered", "replicated", "clean"):
                return await self._failed(ledger_id, result.error or str(status), result.cause)
            if self.stats is not None:
                self.stats.entries_rereplicated += result.entries_copied
            md, _ = await run(self.store.ledgers.read, ledger_id)
            registered = await run(self._registered)
            still = await bookies_missing_replicas(self.client, ledger_id, md, registered, known_lost)
            if still:
                return await self._failed(ledger_id, f"still missing replicas on {', '.join(sorted(still))}")
        self._grace_over.discard(ledger_id)
        self._grace_until.pop(ledger_id, None)
        self._failures.pop(ledger_id, None)
        done = await run(self.store.underreplication.mark_replicated, ledger_id, version)
        if not done:
            log.info("ledger %d was marked again while it was re-replicated; it stays marked", ledger_id)
            return "remarked"
        if lost:
            log.info(
                "ledger %d re-replicated (was missing on %s) in %.1fs",
                ledger_id,
                ", ".join(sorted(lost)),
                time.monotonic() - started,
            )
            if self.stats is not None:
                self.stats.ledgers_rereplicated += 1
                self._record_recovery_time(ledger_id)
        return "replicated" if lost else "clean"

    def _hold(
        self,
        ledger_id: int,
        why: str,
        seconds: float,
        fn: Callable[..., object],
        *args: object,
        since: int | None = None,
    ) -> None:
        """Keep the ledger's lock ``seconds`` from ``since`` (ms; default now), then call
        ``fn(*args)``.  Held at the end of an attempt, while the ledger is still
        ``active``: the status node says so once the attempt ends and the ledger
        leaves ``active`` (a status written in between would still say it is being
        re-replicated, with the failure that ended it)."""
        now = self._now_ms() if since is None else since
        self.held[ledger_id] = self.reactor.callLater(seconds, fn, *args)
        self.holds[ledger_id] = Hold(why, now, now + int(seconds * 1000))

    def _unhold(self, ledger_id: int) -> None:
        call = self.held.pop(ledger_id, None)
        if call is not None and call.active():
            call.cancel()
        self.holds.pop(ledger_id, None)
        self._registered_at_hold.pop(ledger_id, None)
        self._held_version.pop(ledger_id, None)

    def _record_recovery_time(self, ledger_id: int) -> None:
        """Mark's ctime (the marking host's clock) to now (ours); skipped when the
        mark has no ctime or the clocks disagree so much that it is negative."""
        ctime = self._marked_at.pop(ledger_id, None)
        if ctime is None:
            return
        waited = self.reactor.seconds() - ctime / 1000.0
        if waited >= 0 and self.stats is not None:
            self.stats.recovery_seconds_sum += waited
            self.stats.recovery_seconds_count += 1

    def pace(self, nbytes: int, fn: Callable[..., object], *args: object) -> bool:
        """(The copier's throttle, called before each write of a re-replication.)  Count the
        bytes about to be written and hold their ``fn(*args)`` to the next tick of this
        worker's grid (and replicationRateByBytes); True when it ran at once."""
        if self.stats is not None:
            self.stats.bytes_rereplicated += nbytes
        return self.throttle(nbytes, fn, *args)

    def _registered(self) -> set[str]:
        return registered_bookies(self.store.registration)

    def _release_on_new_bookies(self, registered: set[str]) -> None:
        """A bookie registered since a ledger was held: a ledger held after a failure
        is let go at once (the attempt may succeed now); an open ledger in its grace
        period is looked at again (its lost bookie may be back: nothing to fence)
        and held for what is left of the period if it still misses a replica."""
        for ledger_id, before in list(self._registered_at_hold.items()):
            new = registered - before
            if not new:
                continue
            hold = self.holds.get(ledger_id)
            why = None if hold is None else hold.why
            log.info(
                "ledger %d: %s registered since it was held (%s): looking at it again now",
                ledger_id,
                ", ".join(sorted(new)),
                why,
            )
            version = self._held_version.get(ledger_id)
            if why == "grace" and version is not None:  # (a grace period's hold keeps the mark's version)
                self._unhold(ledger_id)
                self.active[ledger_id] = self._now_ms()
                defer.ensureDeferred(self._retry_held(ledger_id, version))
            else:
                self._release(ledger_id)

    def _grace_expired(self, ledger_id: int, version: int) -> None:
        self.held.pop(ledger_id, None)
        self.holds.pop(ledger_id, None)
        if not self.running:
            return
        self._registered_at_hold.pop(ledger_id, None)
        self._held_version.pop(ledger_id, None)
        self._grace_over.add(ledger_id)
        self._grace_until.pop(ledger_id, None)
        self.active[ledger_id] = self._now_ms()
        defer.ensureDeferred(self._retry_held(ledger_id, version))

    async def _retry_held(self, ledger_id: int, version: int) -> None:
        """Our lock is still held: re-replicate now (after its grace period: fencing the open ledger)."""
        self._publish()
        try:
            await self.rereplicate(ledger_id, version)
        except Exception as exc:  # noqa: BLE001
            await self._failed(ledger_id, str(exc))
        finally:
            self.active.pop(ledger_id, None)
            self._publish()

    async def _failed(self, ledger_id: int, why: str, cause: str | None = None) -> str:
        """Count a failed attempt (``cause``: :data:`~bkctl.wire.client.rereplication.CAUSES`,
        when known) and keep the ledger's lock for a while."""
        count = self._failures.get(ledger_id, 0) + 1
        self._failures[ledger_id] = count
        grace = self.config.lock_release_of_failed_ledger_grace_period * min(2 ** (count - 1), 8)
        kept = grace if grace > 0 and self.running else 0
        log.warning(
            "ledger %d: re-replication failed (%s); keeping its lock %gs before letting go", ledger_id, why, grace
        )
        now = self._now_ms()
        self.last_failure = WorkerFailure(ledger_id, why, now, kept)
        self._record_attempt(ledger_id, FailedAttempt(why[: self.REASON_CHARS], now, now + int(kept * 1000), cause))
        if self.stats is not None:
            self.stats.failures += 1
        if kept:
            self._hold(ledger_id, "failed", kept, self._release, ledger_id, since=now)
            self._registered_at_hold[ledger_id] = await self._registered_now()
        else:
            self._release(ledger_id)
        return "failed"

    async def _registered_now(self) -> set[str]:
        try:
            registered: set[str] = await self.client.run_blocking(self._registered)
            return registered
        except Exception:  # noqa: BLE001 - ZooKeeper trouble: any bookie seen later counts as new
            return set()

    def _record_attempt(self, ledger_id: int, attempt: FailedAttempt) -> None:
        attempts = self.attempts.pop(ledger_id, [])
        self.attempts[ledger_id] = (attempts + [attempt])[-self.ATTEMPTS_PER_LEDGER :]
        while len(self.attempts) > self.LEDGERS_WITH_ATTEMPTS:  # the ledger failed longest ago goes
            del self.attempts[next(iter(self.attempts))]

    def _release(self, ledger_id: int) -> None:
        self._unhold(ledger_id)
        self._marked_at.pop(ledger_id, None)
        self.client.run_blocking(self.store.underreplication.release, ledger_id).addErrback(
            lambda f: log.warning("ledger %d: could not release its lock: %s", ledger_id, f.getErrorMessage())
        )
        self._publish()
        self.wake()
