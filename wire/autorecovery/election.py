"""Auditor election on Java's znodes (``ZkLedgerAuditorManager``).

Every autorecovery daemon, Java's or ours, puts an EPHEMERAL_SEQUENTIAL vote
``B/auditorelection/V_%010d`` (``AuditorVoteFormat``: its bookie id) in the
election.  The lowest vote is the auditor; it writes its vote into
``B/auditorelection`` for people to read.  Every other voter watches only the
vote just below its own (no herd when the auditor goes) and looks again when
it disappears.

A vote lives as long as its ZooKeeper session: when the session is lost the
auditor steps down at once (``on_demoted``), and a new vote is cast when a
new session is established.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.clock import DelayedCall, RunBlocking, ThreadedClock
from bkctl.wire.metadata.store import MetadataStore

log = logging.getLogger(__name__)

__all__ = ["AuditorElection"]


class AuditorElection:
    """Takes part in the election for ``bookie_id`` until :meth:`stop`.

    ``run_blocking(fn, *args)`` runs a store call off the reactor thread;
    ``on_elected()`` and ``on_demoted()`` are called on the reactor thread.
    """

    def __init__(
        self,
        store: MetadataStore,
        bookie_id: str,
        reactor: ThreadedClock,
        run_blocking: RunBlocking,
        on_elected: Callable[[], None],
        on_demoted: Callable[[], None],
        retry_delay: float = 1.0,
    ):
        self.store = store
        self.bookie_id = bookie_id
        self.reactor = reactor
        self._run_blocking = run_blocking
        self._on_elected = on_elected
        self._on_demoted = on_demoted
        self.retry_delay = retry_delay
        self.vote: str | None = None
        self.is_auditor = False
        self._running = False
        self._checking = False
        self._check_again = False
        self._retry: DelayedCall | None = None
        self._unwatch_session: Callable[[], None] | None = None

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> defer.Deferred[None]:
        """Vote; fires once the first look at the votes is done (the vote is cast,
        or the attempt failed and will be retried)."""
        self._running = True
        self._unwatch_session = self.store.on_session_lost(self._session_state)
        return self._check() or defer.succeed(None)

    def stop(self) -> defer.Deferred[None]:
        """Leave the election: step down and delete the vote (so the next voter
        takes over now rather than when this session ends)."""
        self._running = False
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        unwatch, self._unwatch_session = self._unwatch_session, None
        if unwatch is not None:
            unwatch()
        self._step_down()
        vote, self.vote = self.vote, None
        if vote is None:
            return defer.succeed(None)

        def withdraw() -> None:
            try:
                self.store.auditor.withdraw_vote(vote)
            except Exception:  # noqa: BLE001 - already gone with the session
                pass

        return self._run_blocking(withdraw)

    # -- the election -----------------------------------------------------------------
    def _check(self) -> defer.Deferred[None] | None:
        """Look at the votes (one look at a time; a look asked for meanwhile runs next)."""
        if not self._running:
            return None
        if self._checking:
            self._check_again = True
            return None
        self._checking = True
        d = defer.ensureDeferred(self._look())

        def done(_: None) -> None:
            self._checking = False
            if self._check_again:
                self._check_again = False
                self._check()

        def failed(failure: Failure) -> None:
            log.warning("auditor election: %s; trying again in %gs", failure.getErrorMessage(), self.retry_delay)
            if self._running and (self._retry is None or not self._retry.active()):
                self._retry = self.reactor.callLater(self.retry_delay, self._check)

        return d.addErrback(failed).addBoth(done)

    async def _look(self) -> None:
        if self.vote is None:
            self.vote = await self._run_blocking(self.store.auditor.cast_vote, self.bookie_id)
            log.info("auditor election: %s voted as %s", self.bookie_id, self.vote)
        votes = await self._run_blocking(self.store.auditor.votes)
        if not self._running:
            return
        if self.vote not in votes:  # our session ended meanwhile: vote again
            self._step_down()
            self.vote = None
            self._check_again = True
            return
        index = votes.index(self.vote)
        if index == 0:
            if not self.is_auditor:
                await self._run_blocking(self.store.auditor.publish, self.bookie_id)
                self.is_auditor = True
                log.info("auditor election: %s is the auditor", self.bookie_id)
                self._on_elected()
            return
        self._step_down()
        predecessor = votes[index - 1]
        watching = await self._run_blocking(
            self.store.auditor.watch_vote_gone, predecessor, lambda: self.reactor.callFromThread(self._check)
        )
        if not watching:  # it went between the listing and the watch
            self._check_again = True

    def _step_down(self) -> None:
        if self.is_auditor:
            self.is_auditor = False
            log.info("auditor election: %s is no longer the auditor", self.bookie_id)
            self._on_demoted()

    def _session_state(self) -> None:
        """The store's session ended (called from its thread): it took our vote."""
        self.reactor.callFromThread(self._session_lost)

    def _session_lost(self) -> None:
        log.warning("auditor election: ZooKeeper session of %s lost; voting again once reconnected", self.bookie_id)
        self._step_down()
        self.vote = None
        if self._running and (self._retry is None or not self._retry.active()):
            self._retry = self.reactor.callLater(self.retry_delay, self._check)
